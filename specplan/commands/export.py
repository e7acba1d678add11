"""`specplan export`: the launch line (and environment) that runs a spec on an engine; a
deployment: one launch per instance."""

from __future__ import annotations

from specplan.commands.common import EXIT_FOUND_PROBLEM
from specplan.commands.fit import echo
from specplan.commands.load import load_spec_arg


def run(spec: str, engine: str | None, version: str | None) -> int:
    from specplan.ecosystem.translate import Refusal

    target = load_spec_arg(spec)
    target.refuse_export(engine, version)
    try:
        text = target.export(engine, version)
    except Refusal as exc:
        echo(f"specplan export: {exc}", err=True)
        return EXIT_FOUND_PROBLEM
    echo(text, nl=False)
    return 0
