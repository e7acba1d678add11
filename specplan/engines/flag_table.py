"""An engine's launch flags as data, and argparse's rules for reading a word as one of them.

The tables in <engine>/flags/ list every option string the engine's own parser accepts (SGLang
`python -m sglang.launch_server`, vLLM `vllm serve`), per supported release (releases.py),
with its arity and, for a bare flag, the value each spelling sets. The newest release's table
is stored whole (<engine>/flags/<engine>.json), an older one's as its differences from it
(<engine>/flags/<engine>-<version>.json: `removed`, the flags the older parser lacks, by first option
string; `flags`, its rows of the flags it has that differ or that the newest lacks). They are
generated from the real parsers by tools/engine_flags.py and checked against them by
tests/engines/test_flag_tables.py.

`FlagTable.match(word)` follows argparse: an exact option string; `--name=value`; an unambiguous
prefix of a long option when the parser allows abbreviations (SGLang's `--tp 16` is
`--tp-size 16`); vLLM's FlexibleArgumentParser also reads `--a_b` as `--a-b`.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

# A table as json.load returns it (each key's value per docs above; tools/engine_flags.py
# writes them): read by key, its values any JSON value.
Data = dict[str, Any]

from specplan.engines.releases import check, newest

_DIR = Path(__file__).resolve().parent  # each engine's tables: <engine>/flags/


@dataclass(frozen=True)
class EngineFlag:
    """One argparse action: its option strings (the first is the canonical one)."""

    names: tuple[str, ...]
    dest: str
    nargs: str  # "0" (bare flag), "1", "?", "+", "*" or a count
    # bare flag -> the value it stores (argparse's const: true / false for the tables' flags)
    sets: dict[str, object] = field(default_factory=dict, hash=False, compare=False)
    choices: tuple[object, ...] = ()  # argparse's choices, of the flag's type (str, int)
    json: bool = False  # the value is a JSON object (vLLM config flags)
    keys: tuple[str, ...] | None = None  # the keys that object may hold, when known

    @property
    def name(self) -> str:
        return next((n for n in self.names if n.startswith("--")), self.names[0])


class FlagProblem(ValueError):
    """A word the engine's parser would refuse; the message is argparse's, with a hint."""


@dataclass(frozen=True)
class Match:
    flag: EngineFlag
    option: str  # the full option string the word resolved to
    value: str | None  # the `=value` part, when written so


@dataclass(frozen=True)
class FlagTable:
    engine: str
    version: str
    program: str
    allow_abbrev: bool
    underscores: bool
    json_dotted: bool
    positional: tuple[str, ...]
    flags: tuple[EngineFlag, ...]

    @property
    def options(self) -> dict[str, EngineFlag]:
        return _options(self)

    def match(self, word: str) -> Match:
        """The flag `word` names; FlagProblem when none or several do."""
        name, eq, value = word.partition("=")
        name = self.normal(name)
        known = self.options
        if name in known:
            return Match(known[name], name, value if eq else None)
        if self.allow_abbrev and name.startswith("--"):
            hits = sorted({o for o in known if o.startswith(name)})
            flags = {known[o].dest for o in hits}
            if len(flags) == 1:
                return Match(known[hits[0]], hits[0], value if eq else None)
            if hits:
                raise FlagProblem(f"ambiguous option: {name} could match {', '.join(hits)}")
        close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise FlagProblem(f"unknown {self.engine} flag {name}{hint}")

    def normal(self, name: str) -> str:
        """vLLM: `--a_b` is `--a-b` (FlexibleArgumentParser, up to the first dot)."""
        if not (self.underscores and name.startswith("--")):
            return name
        head, dot, tail = name[2:].partition(".")
        return "--" + head.replace("_", "-") + dot + tail

    def by_dest(self, dest: str) -> EngineFlag:
        return next(f for f in self.flags if f.dest == dest)


@cache
def _options(table: FlagTable) -> dict[str, EngineFlag]:
    return {name: f for f in table.flags for name in f.names}


def stored_path(engine: str, version: str) -> Path:
    name = engine if version == newest(engine) else f"{engine}-{version}"
    return _DIR / engine / "flags" / f"{name}.json"


def stored_data(engine: str, version: str | None = None) -> Data:
    """One release's table as data: the newest's file, or the newest with a release's
    differences applied."""
    version = check(engine, version)
    base: Data = json.loads(stored_path(engine, newest(engine)).read_text())
    if version == newest(engine):
        return base
    return apply(base, json.loads(stored_path(engine, version).read_text()))


def differences(base: Data, data: Data) -> Data:
    """`data` (one release's table) as its differences from `base` (the newest's)."""
    mine = {f["names"][0]: f for f in data["flags"]}
    theirs = {f["names"][0]: f for f in base["flags"]}
    head = {k: v for k, v in data.items() if k != "flags" and base.get(k) != v}
    return {**head, "base": base["version"],
            "removed": [k for k in theirs if k not in mine],
            "flags": [f for k, f in mine.items() if theirs.get(k) != f]}


def apply(base: Data, diff: Data) -> Data:
    """The release table `diff` describes (the inverse of `differences`)."""
    rows = {f["names"][0]: f for f in diff["flags"]}
    flags = [rows.pop(f["names"][0], f) for f in base["flags"] if f["names"][0] not in diff["removed"]]
    head = {k: v for k, v in {**base, **diff}.items() if k not in ("base", "removed", "flags")}
    return {**head, "flags": flags + list(rows.values())}


@cache
def flag_table(engine: str, version: str | None = None) -> FlagTable:
    """The stored table of `engine` (sglang | vllm) at `version` (default: the newest)."""
    data = stored_data(engine, version)
    flags = tuple(EngineFlag(tuple(f["names"]), f["dest"], f["nargs"], f.get("sets", {}),
                             tuple(f.get("choices", ())), f.get("json", False),
                             tuple(f["keys"]) if "keys" in f else None)
                  for f in data["flags"])
    return FlagTable(engine, data["version"], data["program"], data["allow_abbrev"],
                     data["underscores"], data["json_dotted"], tuple(data["positional"]), flags)
