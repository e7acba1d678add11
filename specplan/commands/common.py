"""What every command shares: exit codes, telling a plan file, the console, JSON output, the
engine release an option names."""

from __future__ import annotations

import json
import sys

import click

EXIT_BAD_INPUT = 2
EXIT_FOUND_PROBLEM = 3


def as_plan(path: str) -> dict | None:
    from specplan.files import not_readable, read_bounded
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


def console():
    """The console every command prints through (commands/fit.py: the width it is given,
    tables that fit or turn vertical, no markup)."""
    from specplan.commands.fit import console as fitting

    return fitting()


def dump_json(data) -> None:
    sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")


def check_release(engine: str, version: str | None) -> None:
    """--engine-version outside the engine's table: a usage error (exit 2) listing them."""
    from specplan.engines.releases import UnknownRelease, check

    try:
        check(engine, version)
    except UnknownRelease as exc:
        raise click.BadParameter(str(exc), param_hint="'--engine-version'") from None
