"""Write specplan/engines/<engine>/flags/retired.json: the launch-flag spellings older releases
accepted and the oldest supported release no longer does, read from those releases' own parsers.

    python tools/retired_flags.py            # both engines
    python tools/retired_flags.py sglang     # one

Each older release in OLDER (below) is downloaded with `pip download --no-deps` into
$SPECPLAN_RETIRED_CACHE (default ~/.cache/specplan-retired, outside the repository), unpacked
without its shared objects, and its parser is built exactly as tools/engine_flags.py builds the
supported ones (tests/engines/flag_tables.py, each release in its own process; a release whose
server_args imports more native modules at start gets those stubbed too, never what builds the
parser). Nothing of the engines' code is copied: only option strings, destinations, arities,
what a bare flag sets, the help text of a retired flag and the replacement these imply.

retired.json holds, per engine:
- `releases`: the older releases read, oldest first, and `supported`: the oldest supported one;
- `names`: per older release, its long options grouped by destination (argparse's own
  abbreviation rule needs every option of the release, so `--speculative-draft` reads as that
  release read it);
- `retired`: one row per destination-group of options the oldest supported release lacks: its
  names, dest, nargs, what a bare flag sets, its help, the last older release that had it
  (`last`), the release that no longer has it (`retired_in`: the next release read), and the
  `replacement` the parsers imply: `renamed` (the same destination under a supported name),
  `sets` (a bare flag that set a destination a supported flag now takes as a value),
  `implied` (a bare flag its last release's help says another supported flag turns on), `key`
  (vLLM: a field of the supported release's --speculative-config, or the key of --hf-overrides
  its last release's ModelConfig.__post_init__ moved the value into: `from: post_init`),
  `split` (the destination now split among several flags: its meaning changed) or none;
- `keys`: the keys of a supported JSON flag (the fields of the config class its parser checks,
  vLLM's --speculative-config) older releases accepted and no supported one does, with the
  releases that had each (retired_keys);
- vLLM only: `connectors`, the KV connector names older releases registered and no supported
  one does, with what replaced each (tools/retired_connectors.py), and `connectors_at`, the flag
  and key that name them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "engines"))

import flag_tables  # noqa: E402

from specplan.engines.flag_table import FlagProblem, flag_table, stored_data  # noqa: E402
from specplan.engines.releases import RELEASES  # noqa: E402

# The older releases read: a spread from the first with speculative decoding flags to the one
# before the oldest supported (every name any of them had and the supported ones lack is
# found in at least the newest that had it).
OLDER = {
    "sglang": ("0.3.6", "0.4.0", "0.4.3", "0.4.6", "0.4.8", "0.4.10", "0.5.2", "0.5.5", "0.5.10",
               "0.5.15", "0.5.19"),
    "vllm": ("0.6.6", "0.7.3", "0.8.5", "0.9.2", "0.10.2", "0.11.0", "0.12.0", "0.13.0", "0.14.0", "0.15.0",
             "0.25.0", "0.29.0"),
}
_BINARY = (".so", ".cubin", ".fatbin")


def cache() -> Path:
    return Path(os.environ.get("SPECPLAN_RETIRED_CACHE") or Path.home() / ".cache" / "specplan-retired")


def unpacked(engine: str, version: str) -> Path:
    root = cache() / f"{engine}-{version}"
    if (root / engine / "__init__.py").exists():
        return root
    cache().mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache().glob(f"{engine}-{version}-*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d",
                        str(cache()), f"{engine}=={version}"], check=True)
        wheels = sorted(cache().glob(f"{engine}-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        zf.extractall(root, [m for m in zf.namelist() if not m.endswith(_BINARY) and ".so." not in m])
    return root


def older_table(engine: str, version: str) -> dict:
    root = str(unpacked(engine, version))
    env = {"SPECPLAN_FLAG_HELP": "1"}
    try:
        return flag_tables.table_in_subprocess(engine, version, root, env)
    except RuntimeError:  # an older server_args imports native modules at start: stub them
        return flag_tables.table_in_subprocess(engine, version, root,
                                               {**env, "SPECPLAN_OLDER_STUBS": "1"})


def replacement(row: dict, supported: dict, mapped: dict | None = None) -> dict | None:
    """What the supported release's flags say took the row's place (`mapped`: what the last
    release that had it set in its place, code_mappings): the first of the rules below, in
    order, that finds one; None when none does."""
    flags = supported["flags"]
    for rule in (_by_code, _moved_into, _renamed, _sets, _spec_key, _said, _implied, _dropped,
                 _split):
        found = rule(row, flags, mapped)
        if found:
            return found
    return None


def _by_code(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """A bare flag whose last release's code set supported destinations in its place."""
    by_dest = {f["dest"]: _long(f) for f in flags}
    if mapped and row["nargs"] == "0" and all(d in by_dest for d in mapped) \
            and all(isinstance(v, (str, int)) or v.get("from") in by_dest for v in mapped.values()):
        return {"kind": "code", "assign": [
            [by_dest[d], v if not isinstance(v, dict) else {"from": by_dest[v["from"]]}]
            for d, v in mapped.items()]}
    return None


def _renamed(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """The same destination, of the same arity, under a supported name."""
    same = [f for f in flags if f["dest"] == row["dest"]]
    if same and (same[0]["nargs"] == row["nargs"] or row["nargs"] == "0" and same[0]["nargs"] == "0"):
        return {"kind": "renamed", "flag": _long(same[0])}
    return None


def _sets(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """A bare flag that set one value of a destination a supported flag now takes as a value."""
    same = [f for f in flags if f["dest"] == row["dest"]]
    if row["nargs"] == "0" and same and len(set((row.get("sets") or {}).values())) == 1:
        value = next(iter(row["sets"].values()))
        if isinstance(value, str) and (not same[0].get("choices") or value in same[0]["choices"]):
            return {"kind": "sets", "flag": _long(same[0]), "value": value}
    return None


def _spec_key(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """vLLM: a field of the supported --speculative-config, named as the flag was."""
    spec = next((f for f in flags if f["dest"] == "speculative_config"), None)
    if spec and spec.get("keys"):
        for prefix in ("speculative_", "ngram_", ""):
            key = row["dest"][len(prefix):] if row["dest"].startswith(prefix) else None
            if key and key in spec["keys"] and row["nargs"] == "1":
                return {"kind": "key", "flag": "--speculative-config", "key": key}
    return None


def _dropped(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """The releases' own words, from the first that had it on: giving it changes nothing (a
    flag that did something first and "has no effect" later changed meaning)."""
    words = f"{row.get('help') or ''} {row.get('refuses') or ''}"
    unused = r"has no effect|[Pp]lease drop this argument"
    if re.search(unused, words) and re.search(unused, row.get("first_help", words)):
        return {"kind": "dropped"}
    return None


def _split(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """Its destination now two or more, one word each after it (cuda_graph_max_bs -> _decode,
    _prefill): the meaning was divided."""
    split = sorted(_long(f) for f in flags if f["dest"].startswith(row["dest"] + "_")
                   and "_" not in f["dest"][len(row["dest"]) + 1:])
    if len(split) >= 2:
        return {"kind": "split", "flags": split,
                "help": {_long(f): f.get("help", "") for f in flags if _long(f) in split}}
    return None


def _moved_into(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """vLLM: the last release put the value under a key of another JSON flag itself."""
    by_dest = {f["dest"]: _long(f) for f in flags}
    into = [(d, v["key"]) for d, v in (mapped or {}).items() if isinstance(v, dict) and "key" in v]
    if into and len(mapped or {}) == 1 and row["nargs"] == "1" and into[0][0] in by_dest:
        return {"kind": "key", "flag": by_dest[into[0][0]], "key": into[0][1], "from": "post_init"}
    return None


def code_mappings(engine: str, version: str) -> dict[str, dict]:
    """SGLang: the deprecated flags ServerArgs.__post_init__ of release `version` maps itself
    (`if self.enable_deepep_moe: self.moe_a2a_backend = "deepep"`), read from the release's
    source with `ast`: {dest: {other dest: constant, or {"from": dest}}} for each `if self.<dest>:`
    whose body only assigns attributes of self (and logs). Any other statement (an assert, an
    environment change) and the flag is not a plain mapping: left out."""
    import ast

    if engine == "vllm":
        return hf_override_mappings(version)
    tree = ast.parse((unpacked(engine, version) / "sglang" / "srt" / "server_args.py").read_text())
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"), None)
    post = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef)
                 and n.name == "__post_init__"), None)
    out: dict[str, dict] = {}
    for node in post.body if post else []:
        if not (isinstance(node, ast.If) and not node.orelse and _self_attr(node.test)):
            continue
        sets = _assignments(node.body)
        if sets:
            out[_self_attr(node.test)] = sets
    return out


def hf_override_mappings(version: str) -> dict[str, dict]:
    """vLLM: the deprecated fields ModelConfig.__post_init__ of release `version` moves into
    its hf_overrides itself (0.11.0: `if self.rope_scaling: hf_override = {"rope_scaling":
    self.rope_scaling}; hf_overrides_kw.update(hf_override)`, warning "Please instead use
    `--hf-overrides ...`"), read with `ast`: {dest: {"hf_overrides": {"key": key}}} for each
    `if self.<dest>:` whose body builds `{key: self.<dest>}` and updates a local taken from
    self.hf_overrides."""
    import ast

    root = unpacked("vllm", version) / "vllm"
    source = next((p for p in (root / "config" / "model.py", root / "config" / "__init__.py",
                               root / "config.py") if p.is_file()), None)
    tree = ast.parse(source.read_text()) if source else ast.Module(body=[], type_ignores=[])
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelConfig"), None)
    post = next((n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef)
                 and n.name == "__post_init__"), None)
    if post is None:
        return {}
    # the locals that hold self.hf_overrides (hf_overrides_kw = self.hf_overrides)
    holders = {t.id for n in ast.walk(post) if isinstance(n, ast.Assign)
               and _self_attr(n.value) == "hf_overrides" for t in n.targets if isinstance(t, ast.Name)}
    out: dict[str, dict] = {}
    for node in post.body:
        dest = _set_test(node.test) if isinstance(node, ast.If) else None
        if dest is None:
            continue
        keys = [k.value for n in ast.walk(node) if isinstance(n, ast.Dict) and len(n.keys) == 1
                for k, v in zip(n.keys, n.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _self_attr(v) == dest]
        updates = [n for n in ast.walk(node) if isinstance(n, ast.Call)
                   and isinstance(n.func, ast.Attribute) and n.func.attr == "update"
                   and isinstance(n.func.value, ast.Name) and n.func.value.id in holders]
        if len(keys) == 1 and updates:
            out[dest] = {"hf_overrides": {"key": keys[0]}}
    return out


def _set_test(node) -> str | None:
    """`self.<dest>` of an if test `self.<dest>` or `self.<dest> is not None`."""
    import ast

    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.IsNot) \
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        return _self_attr(node.left)
    return _self_attr(node)


def _self_attr(node) -> str | None:
    import ast

    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _assignments(body: list) -> dict | None:
    import ast

    sets: dict = {}
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            continue  # a warning or a log line
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _self_attr(stmt.targets[0])):
            return None
        value = stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, (str, int, bool)):
            sets[_self_attr(stmt.targets[0])] = value.value
        elif _self_attr(value):
            sets[_self_attr(stmt.targets[0])] = {"from": _self_attr(value)}
        else:
            return None
    return sets or None


def _accepted(table, name: str) -> bool:
    """Whether the supported release's parser reads `name` at all (an abbreviation of one of
    its flags, or vLLM's own -O handling): import never asks the retired table about it."""
    if name == "-O" and table.json_dotted:
        return True
    try:
        table.match(name)
    except FlagProblem:
        return False
    return True


def _said(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """The release's own help naming the flag that replaced it ("Use --x instead")."""
    words = f"{row.get('refuses') or ''} {row.get('help') or ''}"
    found = re.search(r"[Uu]se '?(--[a-z0-9-]+)(?:[= ]([^'\s{}]+))?'? instead", words)
    by_name = {n: f for f in flags for n in f["names"]}
    if not found or found.group(1) not in by_name:
        return None
    flag, value = by_name[found.group(1)], found.group(2)
    if value is None and flag["nargs"] == row["nargs"]:
        return {"kind": "renamed", "flag": _long(flag), "from": "help"}
    if value is not None and row["nargs"] == "0" and flag["nargs"] == "1" \
            and (not flag.get("choices") or value in map(str, flag["choices"])):
        return {"kind": "sets", "flag": _long(flag), "value": value, "from": "help"}
    return {"kind": "help", "flags": [_long(flag)]}


def _implied(row: dict, flags: list[dict], mapped: dict | None) -> dict | None:
    """A bare flag the release's own help says another supported flag turns on ("When
    `--reasoning-parser` is specified, reasoning mode is automatically enabled."): `implied`,
    with that sentence. Import drops the flag only where the line gives the other one."""
    words = f"{row.get('refuses') or ''} {row.get('help') or ''}"
    found = re.search(r"[^.]*\b[Ww]hen [`']?(--[a-z0-9-]+)[`']? is (?:specified|given|set)"
                      r"[^.]*\bautomatically enabled\.", words)
    by_name = {n: f for f in flags for n in f["names"]}
    if row["nargs"] != "0" or not found or found.group(1) not in by_name:
        return None
    return {"kind": "implied", "flag": _long(by_name[found.group(1)]),
            "said": found.group(0).strip(), "from": "help"}


def _long(flag: dict) -> str:
    return next((n for n in flag["names"] if n.startswith("--")), flag["names"][0])


def build(engine: str) -> dict:
    oldest = RELEASES[engine][0]
    supported = stored_data(engine, oldest)
    # a name any supported release reads is no retired spelling (import never asks about it)
    known = {n for v in RELEASES[engine] for f in stored_data(engine, v)["flags"] for n in f["names"]}
    order = [*OLDER[engine], oldest]
    names: dict[str, list[list[str]]] = {}
    rows: dict[str, dict] = {}
    modern = [flag_table(engine, v) for v in RELEASES[engine]]
    tables: dict[str, dict] = {}
    for i, version in enumerate(OLDER[engine]):
        table = tables[version] = older_table(engine, version)
        names[version] = [sorted(n for n in f["names"] if n.startswith("--")) for f in table["flags"]]
        for flag in table["flags"]:
            gone = [n for n in flag["names"] if n not in known
                    and not any(_accepted(t, n) for t in modern)]
            if not gone:
                continue
            row = {k: flag[k] for k in ("dest", "nargs", "sets", "choices", "json", "help",
                                        "refuses") if k in flag}
            key = f"{flag['dest']} {flag['names'][0]}"  # one argparse action over the releases
            had = rows.get(key, {})
            row["names"] = sorted({*had.get("names", ()), *gone})
            rows[key] = {**row, "first": had.get("first", version), "last": version,
                         "retired_in": order[i + 1],
                         "first_help": had.get("first_help", row.get("help") or "")}
            mapped = code_mappings(engine, version).get(flag["dest"])
            if mapped:
                rows[key]["post_init"] = mapped
    supported_help = _with_help(engine, supported)
    retired = []
    for row in rows.values():
        row["replacement"] = replacement(row, supported_help, row.get("post_init"))
        del row["first_help"]  # read by replacement only
        retired.append(row)
    retired.sort(key=lambda r: r["names"][0])
    data = {"engine": engine, "supported": oldest, "releases": list(OLDER[engine]),
            "names": names, "retired": retired}
    return {**data, **_values(engine, tables)}


def _values(engine: str, tables: dict[str, dict]) -> dict:
    """The retired values of supported flags: JSON keys (`keys`), and vLLM's KV connector
    names of --kv-transfer-config, from the releases' factories (`connectors`)."""
    out: dict = {}
    keys = retired_keys(engine, tables)
    if keys:
        out["keys"] = keys
    if engine == "vllm":
        from retired_connectors import retired_connectors, reused_connectors
        from wheels import engine_root

        oldest = RELEASES[engine][0]
        roots = {v: unpacked(engine, v) for v in OLDER[engine]}
        roots[oldest] = engine_root(engine, oldest)
        out["connectors_at"] = {"dest": "kv_transfer_config", "key": "kv_connector"}
        supported = [engine_root(engine, v) for v in RELEASES[engine]]
        out["connectors"] = retired_connectors(roots, supported)
        out["reused_connectors"] = reused_connectors(roots, supported)
    return out


def retired_keys(engine: str, tables: dict[str, dict]) -> list[dict]:
    """The keys of a supported JSON flag (vLLM's --speculative-config: the fields of the config
    class its parser validates against, flag_tables.py `keys`) older releases accepted and no
    supported release does: one row per flag and key, with the releases that had it."""
    order = [*tables, RELEASES[engine][0]]
    now: dict[str, set[str]] = {}
    for v in RELEASES[engine]:
        for f in stored_data(engine, v)["flags"]:
            if f.get("keys") is not None:
                now.setdefault(f["dest"], set()).update(f["keys"])
    rows: dict[tuple[str, str], dict] = {}
    for i, (version, table) in enumerate(tables.items()):
        for flag in table["flags"]:
            for key in flag.get("keys") or []:
                if flag["dest"] in now and key not in now[flag["dest"]]:
                    row = rows.setdefault((flag["dest"], key), {"flag": _long(flag), "key": key,
                                                                "first": version})
                    row.update(last=version, retired_in=order[i + 1])
    return sorted(rows.values(), key=lambda r: (r["flag"], r["key"]))


def _with_help(engine: str, supported: dict) -> dict:
    """The oldest supported table with each flag's help, from the newest release's parser (the
    supported tables store no help)."""
    newest = flag_tables.table_in_subprocess(engine, None, None, {"SPECPLAN_FLAG_HELP": "1"})
    helps = {f["names"][0]: f.get("help", "") for f in newest["flags"]}
    return {**supported, "flags": [{**f, "help": helps.get(f["names"][0], "")}
                                   for f in supported["flags"]]}


def dumps(data: dict) -> str:
    """One row per line, so a diff names the rows that changed."""
    names = ",\n  ".join(f"{json.dumps(v)}: {json.dumps(g)}" for v, g in data["names"].items())
    rows = ",\n  ".join(json.dumps(r) for r in data["retired"])
    head = json.dumps({k: data[k] for k in ("engine", "supported", "releases")})[:-1]
    tail = ""
    if "keys" in data:
        tail += ',\n "keys": [\n  ' + ",\n  ".join(json.dumps(r) for r in data["keys"]) + "\n ]"
    if "connectors" in data:
        tail += f',\n "connectors_at": {json.dumps(data["connectors_at"])}'
        tail += ",\n \"connectors\": [\n  " + ",\n  ".join(json.dumps(r) for r in data["connectors"]) + "\n ]"
        tail += (",\n \"reused_connectors\": [\n  "
                 + ",\n  ".join(json.dumps(r) for r in data["reused_connectors"]) + "\n ]")
    return f'{head},\n "names": {{\n  {names}\n }},\n "retired": [\n  {rows}\n ]{tail}\n}}\n'


def main(args: list[str]) -> None:
    for engine in args or list(OLDER):
        data = build(engine)
        path = REPO / "specplan" / "engines" / engine / "flags" / "retired.json"
        path.write_text(dumps(data))
        print(f"wrote {path.relative_to(REPO)}: {len(data['retired'])} retired spellings from "
              f"{engine} {', '.join(OLDER[engine])}")


if __name__ == "__main__":
    main(sys.argv[1:])
