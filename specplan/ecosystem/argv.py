"""A launch line's words -> the engine's arguments, read by the engine's own argparse rules.

`read_words(table, words)` splits the words after the program into `Arg`s (one per option or
positional, keeping the words exactly as written) and the values argparse would store per
destination. It accepts what the engine's parser accepts (specplan/engines/flag_table.py):
abbreviations, vLLM's `--a_b`, `-O3` / `-O=3` / `-O 3`, and vLLM's dotted JSON
(`--speculative-config.method mtp`, `--compilation-config.cudagraph_capture_sizes+ 1,2`),
which FlexibleArgumentParser merges into one JSON object appended after the other arguments.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from specplan.ecosystem.shell import option_like as _option_like
from specplan.ecosystem.shell import shell_text
from specplan.engines.flag_table import EngineFlag, FlagProblem, FlagTable

_OPT_LEVELS = {"0", "1", "2", "3"}


@dataclass(frozen=True)
class Arg:
    """One argument as written: its words, and the flag it sets (None for a positional)."""

    words: tuple[str, ...]
    flag: EngineFlag | None = None
    value: object = None

    @property
    def dest(self) -> str | None:
        return self.flag.dest if self.flag else None

    @property
    def text(self) -> str:
        """The words as the shell reads them back: a kept shell variable stays expandable."""
        return " ".join(shell_text(w) for w in self.words)




def read_words(table: FlagTable, words: list[str]) -> tuple[list[Arg], dict[str, object]]:
    """(arguments in order, {dest: value} as the parser stores it); FlagProblem as argparse."""
    args: list[Arg] = []
    values: dict[str, object] = {}
    dotted: dict[str, dict] = {}
    positional = list(table.positional)
    i = 0
    while i < len(words):
        word, start = words[i], i
        i += 1
        if not _option_like(word):
            if not positional:
                raise FlagProblem(f"unrecognized arguments: {word}")
            dest = positional.pop(0)
            args.append(Arg((word,), None, word))
            values[dest] = word
            continue
        if table.json_dotted and word.startswith("-O") and word != "-O" and "." not in word:
            level = word[3:] if word[2:3] == "=" else word[2:]
            flag = table.by_dest("optimization_level")
            args.append(Arg((word,), flag, level))
            values[flag.dest] = level
            continue
        if table.json_dotted and word == "-O" and i < len(words) and words[i] in _OPT_LEVELS:
            flag = table.by_dest("optimization_level")
            args.append(Arg((word, words[i]), flag, words[i]))
            values[flag.dest] = words[i]
            i += 1
            continue
        name = word.partition("=")[0]
        if table.json_dotted and "." in name:
            i = _dotted(table, words, start, args, dotted)
            continue
        match = table.match(word)
        flag = match.flag
        value, i = _value(flag, match, words, i)
        args.append(Arg(tuple(words[start:i]), flag, value))
        values[flag.dest] = value
    for dest, obj in dotted.items():  # appended after the rest: it overrides a JSON form
        values[dest] = obj
    return args, values


def _value(flag: EngineFlag, match, words: list[str], i: int) -> tuple[object, int]:
    """The value(s) the flag takes from `words[i:]`, and the index past them."""
    nargs, name = flag.nargs, match.option
    if nargs == "0":
        if match.value is not None:
            raise FlagProblem(f"argument {name}: ignored explicit argument {match.value!r}")
        return flag.sets.get(name, True), i
    if match.value is not None:
        return _checked(flag, name, match.value), i
    if nargs in ("1", "?"):
        if i < len(words) and not _option_like(words[i]):
            return _checked(flag, name, words[i]), i + 1
        if nargs == "?":
            return None, i
        raise FlagProblem(f"argument {name}: expected one argument")
    taken = []
    while i < len(words) and not _option_like(words[i]):
        taken.append(_checked(flag, name, words[i]))
        i += 1
    if nargs == "+" and not taken:
        raise FlagProblem(f"argument {name}: expected at least one argument")
    return taken, i


def _checked(flag: EngineFlag, name: str, value: str) -> object:
    if flag.choices and value not in {str(c) for c in flag.choices}:
        shown = ", ".join(repr(str(c)) for c in flag.choices)
        raise FlagProblem(f"argument {name}: invalid choice: {value!r} (choose from {shown})")
    if flag.json:
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise FlagProblem(f"argument {name}: not JSON ({exc}): {value}") from None
    return value


def _dotted(table: FlagTable, words: list[str], start: int, args: list[Arg],
            dotted: dict[str, dict]) -> int:
    """vLLM's `--x.a.b value` / `--x.a.b=value` / `--x.a+ v1,v2`: merged into x's object."""
    word = words[start]
    name, eq, value = word.partition("=")
    i = start + 1
    if not eq:
        if i >= len(words):
            raise FlagProblem(f"argument {name}: expected one argument")
        value, i = words[i], i + 1
    append = name.endswith("+")
    key, *path = table.normal(name.rstrip("+")).split(".")
    flag = table.match(key).flag
    parsed: object = value.split(",") if append else _scalar(value)
    node = dotted.setdefault(flag.dest, {})
    for part in path[:-1]:
        node = node.setdefault(part, {})
    if append and isinstance(node.get(path[-1]), list):
        node[path[-1]] = node[path[-1]] + parsed
    else:
        node[path[-1]] = parsed
    args.append(Arg(tuple(words[start:i]), flag, {".".join(path): parsed}))
    return i


def check_json_keys(table: FlagTable, values: dict[str, object]) -> None:
    """Every JSON-valued flag whose config class the table knows (flags/*.json "keys": the
    dataclass fields of vLLM's SpeculativeConfig, AttentionConfig, CompilationConfig, ...)
    holds only that class's fields: the release's own config class refuses any other key
    (vLLM's config dataclasses take no unknown field), so a release that lacks the key refuses
    the line; FlagProblem names the key and the closest fields."""
    import difflib

    for dest, value in values.items():
        flag = next((f for f in table.flags if f.dest == dest), None)
        if flag is None or not flag.json or flag.keys is None or not isinstance(value, dict):
            continue
        for key in value:
            if key not in flag.keys and not (dest == "speculative_config" and
                                             key.replace("-", "_") in flag.keys):
                # vLLM's EngineArgs.create_speculative_config reads `a-b` as `a_b`
                close = difflib.get_close_matches(key, flag.keys, n=3)
                hint = f"; did you mean {' or '.join(close)}?" if close else ""
                raise FlagProblem(f"unknown {flag.name} key {key!r}{hint}")


def _scalar(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
