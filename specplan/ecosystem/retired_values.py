"""Values of supported flags that older releases accepted and the supported ones refuse: vLLM's
KV connector names in `--kv-transfer-config` (engines/<engine>/flags/retired.json
`connectors`, generated from the older releases' own KVConnectorFactory registrations by
tools/retired_connectors.py).

`modern_connectors(engine, words)` writes each retired connector name in the name the
supported releases register for the same connector, one note each ("written for vLLM <= X:
kv_connector `A` is `B` since Y"); the rest of the value is kept as written. A name with
no replacement is refused, naming the release that retired it (`--strict`: the supported
release's own refusal). `reused_connectors_said` notes a name an older release registered for
another connector than the supported ones do, where the line was written for that release.
"""

from __future__ import annotations

import json
import re

from specplan.ecosystem.launch_read import ImportProblem
from specplan.engines.flag_table import FlagProblem, FlagTable, flag_table
from specplan.engines.releases import NAMES, RELEASES, version_key
from specplan.engines.retired import retired_data


def modern_connectors(engine: str, words: list[str]) -> tuple[list[str], list[str], str | None]:
    """(the words with each retired connector name modernised, one note per name, the newest
    older release that registered every one); the words unchanged and no note when none."""
    data = retired_data(engine) or {}
    rows = {r["name"]: {**r, "engine": engine} for r in data.get("connectors", [])}
    where = data.get("connectors_at")
    if not rows or not where:
        return words, [], None
    table = flag_table(engine, RELEASES[engine][0])
    out, notes, lasts = list(words), [], []
    for i, at, text in _values(table, words, where["dest"]):
        option = words[i].partition("=")[0]
        new, found = _rewrite(text, where["key"], rows, option)
        if not found:
            continue
        out[at] = new if at != i else f"{option}={new}"
        for name in found:
            notes.append(_note(engine, where["key"], rows[name]))
            lasts.append(rows[name]["last"])
    release = min(lasts, key=version_key) if lasts else None
    return out, notes, release


def _values(table: FlagTable, words: list[str], dest: str) -> list[tuple[int, int, str]]:
    """(the option's index, its value word's index, the value) of each `dest` option of the
    line; both indexes the same for `--flag=value`."""
    out = []
    for i, word in enumerate(words):
        at = _value_at(table, words, i, dest)
        if at is not None:
            out.append((i, at, words[at] if at != i else word.partition("=")[2]))
    return out


def _value_at(table: FlagTable, words: list[str], i: int, dest: str) -> int | None:
    """The index of the value word of option `words[i]` when it is `dest` (i itself for
    `--flag=value`), else None."""
    word = words[i]
    if not word.startswith("--"):
        return None
    try:
        match = table.match(word)
    except FlagProblem:
        return None
    if match.flag.dest != dest:
        return None
    if match.value is not None:
        return i
    return i + 1 if i + 1 < len(words) else None


def _rewrite(text: str, key: str, rows: dict[str, dict], option: str) -> tuple[str, list[str]]:
    """`text` (a JSON object, as written) with each `"<key>": "<retired name>"` renamed."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return text, []  # the flag's own check says what is wrong with it
    found: list[str] = []

    def swap(m: re.Match[str]) -> str:
        name = m.group(2)
        if name not in rows:
            return m.group(0)
        row = rows[name]
        if not row.get("replacement"):
            title = NAMES[row["engine"]]
            raise ImportProblem(f"{option} {key} {name!r} is not a connector {title} registers "
                                f"(written for {title} <= {row['last']}: {key} `{name}` was retired "
                                f"in {row['retired_in']} and no supported connector took its "
                                f"place; {row['module'].rpartition('.')[2]}.py registered it in "
                                f"{row['first']} to {row['last']})")
        found.append(name)
        return f'{m.group(1)}"{row["replacement"]["name"]}"'

    return _key_pattern(key).sub(swap, text), found


def _note(engine: str, key: str, row: dict) -> str:
    title = NAMES[engine]
    rep = row["replacement"]
    head = f"written for {title} <= {row['last']}: {key} `{row['name']}`"

    def where(module: str) -> str:
        return module.rpartition(".")[2]

    if rep["kind"] == "renamed":
        return (f"{head} is `{rep['name']}` since {row['retired_in']} (the same connector: "
                f"{title} {row['retired_in']}'s {where(rep['module'])}.py is {row['last']}'s "
                f"{where(row['module'])}.py renamed)")
    return (f"{head} is `{rep['name']}` since {row['retired_in']} ({title} {row['last']}'s "
            f"{row['name']} is a V0 engine connector, a KVConnectorBase, retired with that "
            f"engine; {rep['name']}, registered beside it, is the same backend's V1 engine "
            "connector)")


def reused_connectors_said(engine: str, words: list[str], written_for: str | None) -> list[str]:
    """One note per connector name of the line that its release registered for another
    connector than the supported releases do (retired.json `reused_connectors`: vLLM <= 0.9.2's
    MooncakeConnector is the V0 engine's SimpleConnector): the line keeps the name, now the V1
    connector, and the note says so. Only for a line written for such a release
    (`written_for`, what its retired spellings say); none for a line of the supported ones."""
    data = retired_data(engine) or {}
    rows = {r["name"]: r for r in data.get("reused_connectors", [])}
    where = data.get("connectors_at")
    if not rows or not where or written_for is None:
        return []
    table = flag_table(engine, RELEASES[engine][0])
    title, notes = NAMES[engine], []
    for _, _, text in _values(table, words, where["dest"]):
        for name in _named(text, where["key"]):
            row = rows.get(name)
            if row is None or version_key(written_for) > version_key(row["last"]):
                continue
            kind = "a V0 engine connector, a KVConnectorBase, " if row["v0"] else ""
            notes.append(f"written for {title} <= {written_for}: {where['key']} `{name}` was "
                         f"{title} {row['first']} to {row['last']}'s {row['class']} "
                         f"({row['module'].rpartition('.')[2]}.py, {kind}retired in "
                         f"{row['retired_in']}); {title} {row['reused_in']} registers the name "
                         f"again for the V1 engine's {name} "
                         f"({row['now_module'].rpartition('.')[2]}.py), read here as that")
    return notes


def _named(text: str, key: str) -> list[str]:
    """The names `"<key>": "<name>"` gives in `text`, a JSON object as written."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return []
    return [m.group(2) for m in _key_pattern(key).finditer(text)]


def _key_pattern(key: str) -> re.Pattern[str]:
    return re.compile(r'("' + re.escape(key) + r'"\s*:\s*)"([A-Za-z0-9_]+)"')


def retired_keys_said(engine: str, words: list[str]) -> str | None:
    """What the older releases say of the keys of the line's JSON flags that no supported
    release accepts (retired.json `keys`, from the older releases' config classes): "written
    for vLLM <= X: --speculative-config key `k` was retired in Y (vLLM A to X had it)"; None
    when the line gives none."""
    data = retired_data(engine) or {}
    rows = {(r["flag"], r["key"]): r for r in data.get("keys", [])}
    if not rows:
        return None
    table = flag_table(engine, RELEASES[engine][0])
    said: list[dict] = []
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        try:
            match = table.match(word)
        except FlagProblem:
            continue
        flag = next((n for n in match.flag.names if n.startswith("--")), word)
        text = match.value if match.value is not None else (words[i + 1] if i + 1 < len(words) else "")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            said += [rows[(flag, k)] for k in value if (flag, k) in rows]
    if not said:
        return None
    title = NAMES[engine]
    last = min((r["last"] for r in said), key=version_key)
    each = "; ".join(f"{r['flag']} key `{r['key']}` was retired in {r['retired_in']} ({title} "
                     f"{r['first']} to {r['last']} had it)" for r in said)
    return f"written for {title} <= {last}: {each}; no supported key took its place"
