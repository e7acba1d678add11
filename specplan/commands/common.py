"""What every command shares: exit codes, telling a plan file, the console, JSON output, the
engine release an option names."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, EXIT_OK, Diagnostic, UserError

if TYPE_CHECKING:
    from specplan.commands.fit import FittingConsole

THRESHOLD = (0.0, 100.0)  # diff --threshold's range, in percent (the CLI's FloatRange, the API's)


@dataclass(frozen=True)
class Said:
    """What a command that speaks in its own words (import, enforce, diff) made: its exit code,
    its stdout text and its stderr messages. The CLI prints it; the API returns it (`found`: the
    command worked and found a problem, exit 3) or raises InputRefused (exit 2)."""

    code: int
    text: str
    messages: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return self.code == EXIT_FOUND_PROBLEM

    def raised(self) -> Said:
        """Itself, or InputRefused when it is bad input: the API's reading of the exit code."""
        if self.code not in (EXIT_OK, EXIT_FOUND_PROBLEM):
            raise InputRefused(list(self.messages))
        return self


class InputRefused(UserError):
    """Bad input a command names in its own words (`specplan import: no launch line ...`):
    exit 2; each message is a diagnostic that prints as written."""

    def __init__(self, messages: list[str]):
        def said(message: str) -> Diagnostic:
            where, sep, what = message.partition(": ")
            return Diagnostic(where, None, None, "", what) if sep else Diagnostic(message, None, None, "", "")

        super().__init__([said(m) for m in messages or ["bad input"]])
        self.messages = messages


def as_plan(path: str) -> dict[str, Any] | None:
    from specplan.io.files import not_readable, read_bounded
    from specplan.plan.load import MAX_PLAN_BYTES

    if not_readable(path, MAX_PLAN_BYTES):
        return None
    try:
        data = json.loads(read_bounded(path, MAX_PLAN_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and {"schema_version", "fingerprint"} <= set(data) else None


def is_plan_file(path: str) -> bool:
    """A plan by its name (any case: PLAN.JSON) or by its content (a plan saved as .txt)."""
    return path.lower().endswith(".json") or as_plan(path) is not None


def console() -> FittingConsole:
    """The console every command prints through (commands/fit.py: the width it is given,
    tables that fit or turn vertical, no markup)."""
    from specplan.commands.fit import console as fitting

    return fitting()


def dump_json(data: object) -> None:
    sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")


def check_release(engine: str, version: str | None) -> None:
    """--engine-version outside the engine's table: a usage error (exit 2) listing them."""
    from specplan.engines.releases import UnknownRelease, check

    try:
        check(engine, version)
    except UnknownRelease as exc:
        raise click.BadParameter(str(exc), param_hint="'--engine-version'") from None
