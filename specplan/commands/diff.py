"""`specplan diff`: the first divergence across ranks' traces, or one run's acceptance against another's."""

from __future__ import annotations

from specplan.commands.common import THRESHOLD, Said
from specplan.commands.fit import echo
from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, EXIT_OK


def run(traces: tuple[str, ...], *, acceptance: bool, threshold: float) -> int:
    said = diffed(traces, acceptance=acceptance, threshold=threshold)
    if said.text:
        echo(said.text)
    for message in said.messages:
        echo(message, err=True)
    return said.code


def diffed(traces: tuple[str, ...], *, acceptance: bool = False, threshold: float = 5.0) -> Said:
    """Diff for the CLI and the API alike: the first divergence (exit 3) or none, or with
    `acceptance` run B's acceptance against run A's. Bad traces raise TraceError (exit 2)."""
    if acceptance:
        return _acceptance(traces, threshold)
    from specplan.trace.diff import first_divergence
    from specplan.trace.read import load_traces

    records = load_traces(list(traces))  # every line checked: bad input is exit 2 with file:line
    found = first_divergence(records)
    if found is None:
        n = sum(len(r) for r in records.values())
        return Said(EXIT_OK, f"no divergence: {len(records)} ranks, {n} records")
    return Said(EXIT_FOUND_PROBLEM, found.render())


def _acceptance(runs: tuple[str, ...], threshold: float) -> Said:
    from specplan.trace.diff import Acceptance, acceptance, mixed_plans, shortfall

    if len(runs) != 2:
        return Said(EXIT_BAD_INPUT, "", (f"diff --acceptance: takes two runs, RUN_A RUN_B (their "
                                         f"trace dirs); given {len(runs)}",))
    found: list[Acceptance] = []
    for run in runs:
        mixed = mixed_plans([run])
        if mixed:
            return Said(EXIT_BAD_INPUT, "", (mixed,))
        acc = acceptance(run)
        if acc is None:
            return Said(EXIT_BAD_INPUT, "", (f"{run}: no accepted-length records (a trace written "
                                             "by Runtime.accept or Runtime.record_acceptance with "
                                             "runtime.trace_dir set)",))
        found.append(acc)
    a, b = found
    short = shortfall(a, b)
    lines = [a.render("A"), b.render("B")]
    if short * 100 > threshold:
        lines.append(f"acceptance drop: B falls short of A by {short:.2%} (threshold {threshold:g}%)")
        return Said(EXIT_FOUND_PROBLEM, "\n".join(lines))
    lines.append(f"acceptance holds: B is within {threshold:g}% of A ({-short:+.2%})")
    return Said(EXIT_OK, "\n".join(lines))
