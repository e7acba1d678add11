"""An engine's launch flags as data, and argparse's rules for reading a word as one of them.

The tables in flags/ list every option string the engine's own parser accepts (SGLang 0.5.23
`python -m sglang.launch_server`, vLLM 0.33.0 `vllm serve`), with its arity and, for a bare
flag, the value each spelling sets. They are generated from the real parsers by
tools/engine_flags.py and checked against them by tests/engines/test_flag_tables.py.

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

_DIR = Path(__file__).resolve().parent / "flags"


@dataclass(frozen=True)
class EngineFlag:
    """One argparse action: its option strings (the first is the canonical one)."""

    names: tuple[str, ...]
    dest: str
    nargs: str  # "0" (bare flag), "1", "?", "+", "*" or a count
    sets: dict = field(default_factory=dict, hash=False, compare=False)  # bare flag -> value
    choices: tuple = ()
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


@cache
def flag_table(engine: str) -> FlagTable:
    """The stored table of `engine` (sglang | vllm)."""
    data = json.loads((_DIR / f"{engine}.json").read_text())
    flags = tuple(EngineFlag(tuple(f["names"]), f["dest"], f["nargs"], f.get("sets", {}),
                             tuple(f.get("choices", ())), f.get("json", False),
                             tuple(f["keys"]) if "keys" in f else None)
                  for f in data["flags"])
    return FlagTable(engine, data["program"], data["allow_abbrev"], data["underscores"],
                     data["json_dotted"], tuple(data["positional"]), flags)
