"""Launch lines written for releases older than the supported ones, read and modernised.

The spellings older releases accepted and the oldest supported one refuses are data,
generated from those releases' own parsers (engines/<engine>/flags/retired.json,
tools/retired_flags.py). `modernise(engine, words)` rewrites each such word into the spelling
the supported releases accept, with one note per flag ("written for SGLang <= X: `--a` is
`--b` since Y"), or raises ImportProblem where no supported flag means the same (a flag whose
meaning changed is refused with both meanings). The release a line was written for is the
newest older release whose options read every retired word of it (argparse's own rule:
exact names, then unique prefixes, vLLM's `--a_b` as `--a-b`).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from specplan.ecosystem.launch_read import ImportProblem
from specplan.ecosystem.shell import option_like as _option_like
from specplan.engines.flag_table import FlagProblem, FlagTable, flag_table
from specplan.engines.releases import NAMES, RELEASES, version_key
from specplan.engines.retired import retired_data


@dataclass
class Word:
    """One retired option of the line: where it stands, as written, and its value words."""

    index: int
    name: str  # the option as written, before any `=`
    inline: str | None  # the `=value` part
    values: list[str]


def _group(names: list[list[str]], word: str, table: FlagTable) -> list[str] | None:
    """The option group of an older release that reads `word` (exact, else a unique prefix)."""
    word = table.normal(word)
    exact = [g for g in names if word in g]
    if exact:
        return exact[0]
    if not table.allow_abbrev or not word.startswith("--"):
        return None
    hits = [g for g in names if any(n.startswith(word) for n in g)]
    return hits[0] if len(hits) == 1 else None


def _retired_words(table: FlagTable, words: list[str]) -> list[Word]:
    """The options of `words` every supported release's parser refuses, with their values."""
    others = [flag_table(table.engine, v) for v in RELEASES[table.engine]]
    out, i = [], 0
    while i < len(words):
        word = words[i]
        i += 1
        if not _option_like(word):
            continue
        name, eq, inline = word.partition("=")
        if table.json_dotted and "." in name:
            continue  # vLLM's dotted JSON: read by the supported parser itself
        if any(_reads(t, word) for t in others):
            continue
        values = []
        while not eq and i < len(words) and not _option_like(words[i]):
            values.append(words[i])
            i += 1
        out.append(Word(i - 1 - len(values), name, inline if eq else None, values))
    return out


def modernise(engine: str, words: list[str], by_code: dict[str, list[str]] | None = None
              ) -> tuple[list[str], list[str], str | None]:
    """(the words in the supported spelling, one note per retired flag, the older release the
    line was written for); ImportProblem when a retired flag has no supported spelling of the
    same meaning. Words the supported release reads are returned untouched (no retired word:
    the same list, no note and no release). `by_code`, when given, gets the JSON flags and keys
    a retired flag was moved into as its last release's own code moved it (--hf-overrides
    rope_scaling), which import_line.carry_config_fields completes from the model's config."""
    table = flag_table(engine, RELEASES[engine][0])
    found = _retired_words(table, words)
    data = retired_data(engine)
    if not found or data is None:
        return words, [], None
    release = _written_for(data, table, found)
    if release is None:
        return words, [], None  # no older release reads them either: the supported refusal stands
    out = list(words)
    notes: list[str] = []
    moved: dict[str, dict[str, object]] = {}  # JSON flag -> the keys the retired flags give it
    for word in reversed(found):  # from the end: the indexes before stay valid
        new, note = _rewrite(engine, data, table, release, word, moved, words)
        out[word.index:word.index + 1 + len(word.values)] = new
        notes.insert(0, note)
    if by_code is not None:
        for word in found:
            rep = (_row(data, _group(data["names"][release], word.name, table) or [], release)
                   or {}).get("replacement") or {}
            if rep.get("kind") == "key" and rep.get("from") == "post_init":
                by_code.setdefault(rep["flag"], []).append(rep["key"])
    for flag, keys in moved.items():  # filled from the end: the line's own order back
        out = with_json_keys(out, flag, dict(reversed(list(keys.items()))))
    return out, notes, release


def _written_for(data: dict, table: FlagTable, found: list[Word]) -> str | None:
    """The newest older release whose options read every retired word."""
    for release in reversed(data["releases"]):
        if all(_group(data["names"][release], w.name, table) for w in found):
            return release
    return None


def _row(data: dict, group: list[str], release: str) -> dict | None:
    """The retired row of the option `group` as `release` had it. Where the supported flags
    look like a split of its meaning (retired_flags.py `split`) but a newer older release kept
    the spelling as an alias of one of them, the alias row: the engine's own reading of it."""
    at = version_key(release)
    rows = [r for r in data["retired"] if set(r["names"]) & set(group)]
    row = next((r for r in rows if version_key(r["first"]) <= at <= version_key(r["last"])), None)
    if row is not None and (row.get("replacement") or {}).get("kind") == "split":
        alias = [r for r in rows if version_key(r["first"]) > at
                 and (r.get("replacement") or {}).get("kind") == "renamed"]
        return alias[0] if alias else row
    return row


def _since(data: dict, table: FlagTable, word: Word, release: str, group: list[str]) -> str:
    """The first release after `release` whose options no longer read `word` as `group`."""
    later = [r for r in data["releases"] if version_key(r) > version_key(release)]
    for other in later:
        if _group(data["names"][other], word.name, table) != group:
            return other
    return data["supported"]


def _rewrite(engine: str, data: dict, table: FlagTable, release: str, word: Word,
             moved: dict[str, dict[str, object]], line: list[str]) -> tuple[list[str], str]:
    group = _group(data["names"][release], word.name, table) or []
    title = NAMES[engine]
    head = f"written for {title} <= {release}: `{word.name}`"
    value = [word.inline] if word.inline is not None else word.values
    row = _row(data, group, release)
    if row is None:  # its full name is a supported flag: only the abbreviation was retired
        since = _since(data, table, word, release, group)
        modern = next(n for n in group if _accepts(table, n))
        return [modern, *value], f"{head} is `{modern}` since {since}"
    since = row["retired_in"]
    rep = row.get("replacement") or {}
    kind = rep.get("kind")
    if kind == "renamed" and version_key(row["first"]) > version_key(release):
        return [rep["flag"], *value], (f"{head} is `{rep['flag']}` since {since} ({title} "
                                       f"{row['first']} to {row['last']} read it so)")
    if kind == "renamed":
        return [rep["flag"], *value], f"{head} is `{rep['flag']}` since {since}"
    if kind == "sets" and not value:
        said = f" ({title} {row['last']} already refused it: {row['refuses']})" if row.get("refuses") else ""
        return [rep["flag"], rep["value"]], f"{head} is `{rep['flag']} {rep['value']}` since {since}{said}"
    if kind == "code" and not value:
        new = _assigned(table, rep["assign"], line)
        shown = " ".join(new) or "nothing (every value it set is the default here)"
        return new, (f"{head} is `{shown}` since {since} ({title} {row['last']}'s "
                     "ServerArgs.__post_init__ sets them for it)")
    if kind == "dropped":
        return [], (f"{head} was retired in {since} and changed nothing ({title} {row['last']}: "
                    f"{_said(row)}); dropped")
    if kind == "implied" and not value and (row.get("sets") or {}).get(_full(group, word, table)) is True \
            and _value_of(table, line, rep["flag"]) is not None:
        return [], (f"{head} was retired in {since}; `{rep['flag']}`, on the line, turns it on "
                    f"({title} {row['last']}: {rep['said']!r}); dropped")
    if kind == "key" and len(value) == 1:
        moved.setdefault(rep["flag"], {})[rep["key"]] = _json_value(value[0])
        said = (f" ({title} {row['last']}'s ModelConfig.__post_init__ puts it there itself)"
                if rep.get("from") == "post_init" else "")
        return [], f"{head} is `{rep['flag']}` key `{rep['key']}` since {since}{said}"
    raise ImportProblem(_refusal(head, since, row, rep, title))


def _full(group: list[str], word: Word, table: FlagTable) -> str | None:
    """The option of `group` the word spells (exact, else the one it abbreviates)."""
    name = table.normal(word.name)
    return next((n for n in group if n == name), None) or \
        next((n for n in group if n.startswith(name)), None)


def _assigned(table: FlagTable, assign: list, line: list[str]) -> list[str]:
    """The supported words for what an older release's __post_init__ set: a constant, or the
    value of another flag of the line (none on the line: its default, so nothing to write)."""
    out: list[str] = []
    for flag, value in assign:
        if isinstance(value, dict):
            value = _value_of(table, line, value["from"])
            if value is None:
                continue
        if value is True and table.match(flag).flag.nargs == "0":
            out.append(flag)
        elif value not in (False, None):
            out += [flag, str(value)]
    return out


def _value_of(table: FlagTable, line: list[str], flag: str) -> str | None:
    """The value the line gives `flag` (by any spelling of it), if any."""
    dest = table.match(flag).flag.dest
    for i, word in enumerate(line):
        if not _option_like(word):
            continue
        try:
            match = table.match(word)
        except FlagProblem:
            continue
        if match.flag.dest == dest:
            return match.value if match.value is not None else (line[i + 1] if i + 1 < len(line) else None)
    return None


def _refusal(head: str, since: str, row: dict, rep: dict, title: str) -> str:
    kind = rep.get("kind")
    if kind == "split":  # the meaning changed: both meanings, in the releases' own words
        now = "; ".join(f"`{f}`: {h}" for f, h in rep.get("help", {}).items())
        return (f"{head} changed meaning in {since}: it meant {_said(row)!r} ({title} "
                f"{row['last']}); its place is now taken by {now}; choose one and write it")
    if kind == "implied":
        return (f"{head} was retired in {since}; {title} {row['last']} says: {rep['said']!r}, "
                f"and `{rep['flag']}` is not on the line (or the spelling turns it off): "
                f"give `{rep['flag']}` to turn it on")
    if kind == "help":
        return (f"{head} was retired in {since}; {title} {row['last']} says: {_said(row)!r} "
                f"(the value to give {', '.join(rep['flags'])} is not on the line)")
    return (f"{head} was retired in {since} and no supported flag took its place ({title} "
            f"{row['last']}: {_said(row)!r})")


def _said(row: dict) -> str:
    return row.get("refuses") or row.get("help") or "no help text"


def _reads(table: FlagTable, word: str) -> bool:
    try:
        table.match(word)
    except FlagProblem:
        return False
    return True


def _accepts(table: FlagTable, name: str) -> bool:
    try:
        return table.match(name).option == table.normal(name)
    except FlagProblem:
        return False


def _json_value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def with_json_keys(words: list[str], flag: str, moved: dict[str, object]) -> list[str]:
    """vLLM: the retired flags' values as keys of the JSON flag that took them
    (--speculative-config, --hf-overrides), merged into the line's own, if it has one."""
    for i, word in enumerate(words):
        name, eq, text = word.partition("=")
        if name.replace("_", "-") != flag or not (eq or i + 1 < len(words)):
            continue
        own = _json_value(text if eq else words[i + 1])
        merged = {**moved, **own} if isinstance(own, dict) else own
        if not isinstance(merged, dict):
            raise ImportProblem(f"{flag} is not a JSON object: {text if eq else words[i + 1]}")
        if eq:  # --flag=JSON: one word
            return [*words[:i], f"{name}={json.dumps(merged)}", *words[i + 1:]]
        return [*words[:i + 1], json.dumps(merged), *words[i + 2:]]
    return [*words, flag, json.dumps(moved, separators=(", ", ": "))]


def quoted(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)
