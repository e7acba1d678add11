"""vLLM's KV connector names older releases registered and no supported release does, read
from those releases' own KVConnectorFactory (tools/retired_flags.py writes them into
specplan/engines/vllm/flags/retired.json `connectors`).

A release registers its connectors by name at the end of
vllm/distributed/kv_transfer/kv_connector/factory.py (`KVConnectorFactory.register_connector(
name, module, class)`), read here with `ast`. One row per retired name: the last older release
that registered it (`last`), the next release read (`retired_in`), and the `replacement` the
releases' code implies:
- `renamed`: the first release without the name registers another whose module is the old
  module's source with the old name put in its place (vLLM 0.12.0 shared_storage_connector.py
  is 0.13.0 example_connector.py, SharedStorage -> Example): the same connector;
- `v1`: the old class derives from the V0 engine's KVConnectorBase (the V1 engine's
  KVConnectorFactory.create_connector_v1 asserts KVConnectorBase_V1 of it) and the last
  release that had it registers `<name>V1`, a KVConnectorBase_V1, which the supported releases
  still register: the same backend on the engine that is left;
- none otherwise.

`reused_connectors` finds the other case: a name an older release registered for one
connector, that later releases dropped and a later one registers again for another (vLLM 0.9.2's
`MooncakeConnector` is the V0 engine's SimpleConnector over a Mooncake pipe; 0.15.0 registers
the V1 engine's MooncakeConnector under it). A line written for the old release still imports
(the name is valid), with a note saying which connector it meant then.
"""

from __future__ import annotations

import ast
from pathlib import Path

FACTORY = Path("vllm/distributed/kv_transfer/kv_connector/factory.py")


def registrations(root: Path) -> dict[str, tuple[str, str]]:
    """{name: (module, class)} a release's factory.py registers (none before it had one)."""
    path = root / FACTORY
    if not path.is_file():
        return {}
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "register_connector" and len(node.args) == 3 \
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
            name, module, cls = (a.value for a in node.args)  # type: ignore[attr-defined]
            out[name] = (module, cls)
    return out


def _source(root: Path, module: str) -> str | None:
    path = root / (module.replace(".", "/") + ".py")
    return path.read_text() if path.is_file() else None


def _bases(root: Path, module: str, cls: str) -> list[str]:
    text = _source(root, module)
    tree = ast.parse(text) if text else ast.Module(body=[], type_ignores=[])
    found = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)
    return [b.id for b in found.bases if isinstance(b, ast.Name)] if found else []


def _renamed(old_root: Path, old: tuple[str, str], new_root: Path,
             candidates: dict[str, tuple[str, str]]) -> str | None:
    """The candidate whose module is the old one's source with the old name replaced."""
    before = _source(old_root, old[0])
    stem = old[1].removesuffix("Connector")
    for name, (module, cls) in sorted(candidates.items()):
        after = _source(new_root, module)
        new_stem = cls.removesuffix("Connector")
        if before is None or after is None or not new_stem:
            continue
        base, new_base = old[0].rpartition(".")[2], module.rpartition(".")[2]
        if before.replace(stem, new_stem).replace(base, new_base) == after:
            return name
    return None


def retired_connectors(roots: dict[str, Path], supported: list[Path]) -> list[dict]:
    """`roots`: the older releases' unpacked wheels, oldest first, then the oldest supported
    one; `supported`: every supported release's (a name any of them registers is not retired)."""
    order = list(roots)
    regs = {v: registrations(r) for v, r in roots.items()}
    known = {n for r in supported for n in registrations(r)}
    rows: dict[str, dict] = {}
    for i, version in enumerate(order[:-1]):
        for name in regs[version]:
            if name not in known:
                row = rows.setdefault(name, {"name": name, "first": version})
                row.update(last=version, retired_in=order[i + 1])
    out = []
    for name, row in sorted(rows.items()):
        last, gone = roots[row["last"]], roots[row["retired_in"]]
        old = regs[row["last"]][name]
        new = {n: r for n, r in regs[row["retired_in"]].items() if n not in regs[row["last"]]}
        renamed = _renamed(last, old, gone, new)
        row["module"] = old[0]
        if renamed:
            row["replacement"] = {"kind": "renamed", "name": renamed, "module": new[renamed][0]}
        elif "KVConnectorBase" in _bases(last, *old) and f"{name}V1" in regs[row["last"]] \
                and "KVConnectorBase_V1" in _bases(last, *regs[row["last"]][f"{name}V1"]) \
                and f"{name}V1" in known:
            row["replacement"] = {"kind": "v1", "name": f"{name}V1",
                                  "v1_module": regs[row["last"]][f"{name}V1"][0]}
        else:
            row["replacement"] = None
        out.append(row)
    return out


def reused_connectors(roots: dict[str, Path], supported: list[Path]) -> list[dict]:
    """Names a supported release registers whose registration lapsed in some older release
    after one registered them for another module: one row per name, the old registration's
    releases (`first`, `last`, `retired_in`: the first release without it), its `module` and
    `class`, whether that class is a V0 engine connector (`v0`: a KVConnectorBase), and the first release that registers the name again (`reused_in`, `now_module`)."""
    order = list(roots)
    regs = {v: registrations(r) for v, r in roots.items()}
    now = {n: m for r in supported for n, m in registrations(r).items()}
    out = []
    for name in sorted(now):
        held = [v for v in order if name in regs[v]]
        if not held or held[0] == order[-1]:
            continue
        first = held[0]
        gap = next((v for v in order[order.index(first):] if name not in regs[v]), None)
        if gap is None:
            continue
        last = order[order.index(gap) - 1]
        back = next((v for v in order[order.index(gap):] if name in regs[v]), None)
        old = regs[last][name]
        if old[0] == now[name][0]:
            continue  # the same module registered again: the same connector
        out.append({"name": name, "first": first, "last": last, "retired_in": gap,
                    "module": old[0], "class": old[1],
                    "v0": "KVConnectorBase" in _bases(roots[last], *old),
                    "reused_in": back or "supported", "now_module": now[name][0]})
    return out
