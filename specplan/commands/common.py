"""What every command shares: exit codes, the spec loader, the console, JSON output."""

from __future__ import annotations

import json
import sys

import click

EXIT_BAD_INPUT = 2
EXIT_FOUND_PROBLEM = 3


def load_spec_arg(path: str):
    """The spec (or deployment) a command takes; a plan.json given instead is named as such."""
    from specplan.deploy import load_target
    from specplan.errors import Diagnostic, SpecError

    try:
        return load_target(path)
    except SpecError:
        plan = as_plan(path)
        if plan is None:
            raise
        command = click.get_current_context().info_name
        spec_file = (plan.get("source") or {}).get("spec_file") or "the spec it was compiled from"
        raise SpecError([Diagnostic(path, None, None, "", f"this is a plan; {command} takes the spec "
                                    f"(the YAML this plan was compiled from: {spec_file})")]) from None


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
    from rich.console import Console

    # Off a terminal (pipes, CI logs) rich would squeeze tables into 80 columns. markup=False:
    # names, findings and rank errors are untrusted text ("[/...pair.cc:553]" is not a tag);
    # printers style with rich.text.Text, never with markup strings.
    tty = sys.stdout.isatty()
    wide = None if tty else 200
    return Console(highlight=False, markup=False, width=wide, no_color=not tty, force_terminal=tty)


def dump_json(data) -> None:
    sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
