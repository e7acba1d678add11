"""Shell variables in a launch script: expanded where their value is known, kept where the plan
does not depend on them, refused (naming the variable) where they decide it.

A script's own assignments (`MODEL=/models/x`, `export TP=8`, in order, each expanded with the
ones before it) and the values `specplan import` is given (`--env NAME=VALUE`, the calling
environment with `--use-env`) expand `$NAME`, `${NAME}` and `${NAME:-default}` in the words
after them. A variable still unknown is kept verbatim where its flag is not planned (host,
port, log paths) or is a checkpoint path (the shape then comes from --model-config or
--base); in a planned flag (a width, a method, a count) import refuses it, naming it.
Command substitution (`$(...)`, backquotes) and arithmetic are never run: like a variable, one
the plan does not read is kept (`$(...)` one word, written back unquoted so the shell still
runs it), one that decides the plan is refused.
"""

from __future__ import annotations

import re
import shlex

from specplan.ecosystem.flags import DRAFT_PLACEHOLDER, MODEL_PLACEHOLDER
from specplan.ecosystem.launch_read import ImportProblem
from specplan.engines.flag_table import FlagProblem

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_RUN = re.compile(r"\$\(|`")
_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_ARRAY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=\($")
_ENGINE_ENV = ("SGLANG_", "VLLM_")
_PLACEHOLDER_WORDS = {"$" + MODEL_PLACEHOLDER, "$" + DRAFT_PLACEHOLDER}  # specplan export's own
# arguments whose value is a checkpoint path: the plan reads the shape elsewhere
PATH_DESTS = frozenset({"model_path", "model", "model_tag", "speculative_draft_model_path"})


def option_like(word: str) -> bool:
    """Whether argparse reads `word` as an option (ArgumentParser._parse_optional): not a
    negative number, and no space before its `=` (`--speculative-config={"method": "mtp"}` is
    the option with its value; a word with a space and no option before `=` is a positional)."""
    return word.startswith("-") and len(word) > 1 and not _NUMBER.match(word) \
        and " " not in word.partition("=")[0]


def expand(word: str, variables: dict[str, str]) -> str:
    """`word` with each known variable replaced (an unknown one with a default: the default)."""
    def one(m: re.Match) -> str:
        name = m.group(1) or m.group(3)
        if name in variables:
            return variables[name]
        if m.group(2) is not None:
            return expand(m.group(2), variables)
        return m.group(0)
    return word if _RUN.search(word) else _VAR.sub(one, word)


def assignment(tokens: list[str], variables: dict[str, str]) -> bool:
    """Record a line of only NAME=value words (after `export`, if any) in `variables`, each
    value expanded by the ones known before it; whether the line was one."""
    if not tokens or not all(_ASSIGN.match(t) for t in tokens):
        return False
    for token in tokens:
        match = _ASSIGN.match(token)
        assert match is not None  # every token matched above
        name, value = match.groups()
        variables[name] = expand(value, variables)
    return True


def unresolved(word: str) -> str | None:
    """The first variable (or command substitution) `word` still holds; None when none."""
    if _RUN.search(word):
        return word
    found = _VAR.search(word)
    return found.group(0) if found else None


def ran(word: str) -> bool:
    """Whether the word asks the shell to run something (`$(...)`, backquotes, `$((...))`)."""
    return bool(_RUN.search(word))


def shell_text(word: str) -> str:
    """A word as the shell reads it back: a command substitution as written, a kept shell
    variable double-quoted (still expanded), anything else quoted as a literal."""
    if isinstance(word, Substitution):
        return word
    return quoted(word) if _VAR.search(word) and not _RUN.search(word) else shlex.quote(word)


def quoted(word: str) -> str:
    """A word holding a kept variable, quoted so the shell still expands it: "${MODEL}/x"."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def parse_script(text: str, supplied: dict[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """(env, argv) of a shell launch script: `export X=y` lines, `X=y cmd ...` prefixes,
    `name=( ... )` arrays expanded where `"${name[@]}"` stands (specplan export's form), and
    `\\`-continued command lines. Shell variables the script assigns (`MODEL=...`, `export
    TP=8`) or `supplied` gives are expanded in the words after them (ecosystem/shell.py)."""
    env: dict[str, str] = {}
    argv: list[str] = []
    arrays: dict[str, list[str]] = {}
    variables = dict(supplied or {})
    array: str | None = None
    for number, line in _script_lines(text):
        line, held = _hold_substitutions(line)
        try:
            tokens = [_restore(t, held) for t in shlex.split(line, comments=True)]
        except ValueError as exc:  # an unclosed quote, a backslash before the end
            raise ImportProblem(f"line {number} of the script: {str(exc).lower()} (an unclosed "
                                "quote or a trailing backslash); expected a shell command line") from None
        exported = tokens[:1] == ["export"]
        if exported:
            tokens = tokens[1:]
        if tokens and (m := _ARRAY.match(tokens[0])):
            array, tokens = m.group(1), tokens[1:]
            arrays[array] = []
        if array is not None:
            done = ")" in tokens
            words = tokens[:tokens.index(")")] if done else tokens
            arrays[array].extend(expand(w, variables) for w in words)
            array = None if done else array
            continue
        if exported or _assigns_only(tokens):
            names = [t.partition("=")[0] for t in tokens if "=" in t]
            assignment([t for t in tokens if "=" in t], variables)
            # exported, or an engine variable (SGLANG_*, VLLM_*) set before the launch
            env.update((n, variables[n]) for n in names if exported or n.startswith(_ENGINE_ENV))
            continue
        for token in _without_redirections(tokens):
            m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\[@\]\}", token)
            argv.extend(arrays.get(m.group(1), []) if m else [expand(token, variables)])
    return env, argv


_REDIRECT = re.compile(r"^(?:\d*>>?|&>>?|\d*<)$")  # its target is the next word
_REDIRECT_TO = re.compile(r"^(?:\d*>>?|&>>?|\d*<)&?\S+$")  # `2>&1`, `>log`, `2>/dev/null`


def _without_redirections(tokens: list[str]) -> list[str]:
    """A command's words as the command gets them: bash takes the redirections (`> log`,
    `2>&1`, `&>log`) and a trailing `&` or `;` itself, and passes none of them on."""
    out: list[str] = []
    skip = False
    for i, token in enumerate(tokens):
        if skip:
            skip = False
        elif isinstance(token, Substitution) or not (_REDIRECT.match(token) or _REDIRECT_TO.match(token)
                                                      or token in ("&", ";") and i == len(tokens) - 1):
            out.append(token)
        else:
            skip = bool(_REDIRECT.match(token))
    return out


def assigns_only(line: str) -> bool:
    """Whether a script line only sets shell variables (`MODEL=/x`, `A=1 B=2`): no command."""
    try:
        return _assigns_only(shlex.split(line, comments=True))
    except ValueError:
        return False


def _hold_substitutions(line: str) -> tuple[str, list[str]]:
    """`line` with each unquoted command substitution `$(...)` (parentheses balanced) replaced
    by one placeholder word, and the substitutions in order: shlex would cut `$(seq -s ' ' 1 64)`
    into words of its own, while the shell gives it to the command as it runs it."""
    held: list[str] = []
    out: list[str] = []
    i, quote = 0, ""
    while i < len(line):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif line.startswith("$(", i) and not line.startswith("$((", i):
            depth, j = 0, i + 1
            while j < len(line):
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                if depth == 0:
                    break
                j += 1
            if depth == 0:
                held.append(line[i:j + 1])
                out.append(f"__specplan_substitution_{len(held) - 1}__")
                i = j + 1
                continue
        out.append(ch)
        i += 1
    return "".join(out), held


def split_words(text: str) -> list[str]:
    """shlex.split, but a command substitution `$(...)` stays one word, as written (an
    engine_args entry export keeps verbatim; ecosystem/shell.py shell_words)."""
    line, held = _hold_substitutions(text)
    return [_restore(t, held) for t in shlex.split(line)]


class Substitution(str):
    """A word holding a command substitution the shell runs as the line starts (unquoted or in
    double quotes): written back as it was, so the shell still runs it; specplan never does."""


def _restore(token: str, held: list[str]) -> str:
    word = re.sub(r"__specplan_substitution_(\d+)__", lambda m: held[int(m.group(1))], token)
    return Substitution(word) if word != token else token


def _assigns_only(tokens: list[str]) -> bool:
    return bool(tokens) and all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", t) for t in tokens)


def _script_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: `\\`-continued lines joined."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(), 1):
        if not parts:
            start = number
        if line.endswith("\\"):  # as bash: a backslash ending the file continues into nothing
            parts.append(line[:-1] + " ")
            continue
        out.append((start, "".join(parts) + line))
        parts = []
    if parts:
        out.append((start, "".join(parts)))
    return out


def shell_words(conv, table, words: list[str], notes: list[str]) -> None:
    """A word still holding a shell variable after the script's own assignments and the given
    values (ecosystem/shell.py): kept verbatim where the plan does not read it (a flag specplan
    does not plan, a checkpoint path), refused where it decides the plan, naming the variable;
    a command substitution or arithmetic is never run: refused."""
    for i, word in enumerate(words):
        var = None if word in _PLACEHOLDER_WORDS else unresolved(word)
        if var is None:
            continue
        dest, flag = _dest_of(table, words, i)
        if dest is None or dest not in conv.launch.modelled or dest in PATH_DESTS:
            never = " (never run)" if ran(word) else ""
            notes.append(f"kept {var} as written{never} ({flag or 'an argument'}): the plan "
                         "does not depend on it")
            continue
        if ran(word):
            raise ImportProblem(f"the launch line holds a shell expansion, {word!r} in {flag}: "
                                f"it decides the plan ({conv.launch.modelled[dest]}) and "
                                "specplan runs no command or arithmetic of the shell; give its "
                                "value on the line")
        name = var.strip("${}").partition(":")[0]
        raise ImportProblem(f"the launch line holds a shell expansion, {var!r} in {flag} "
                            f"{word}: it decides the plan ({conv.launch.modelled[dest]}) and "
                            f"its value is not known; assign it in the script, or give "
                            f"--env {name}=VALUE (or --use-env)")


def _dest_of(table, words: list[str], i: int) -> tuple[str | None, str | None]:
    """(argparse dest, option) of the argument words[i] belongs to; (positional, None) or
    (None, None) when it is none of the table's."""
    word = words[i]
    candidates = [word.partition("=")[0]] if option_like(word) and "=" in word else []
    if i and option_like(words[i - 1]) and "=" not in words[i - 1]:
        candidates.append(words[i - 1])
    for option in candidates:
        try:
            match = table.match(option)
        except FlagProblem:
            continue
        if match.flag.nargs != "0":
            return match.flag.dest, match.option
    if option_like(word):
        return None, None
    return (table.positional[0] if table.positional else None), None
