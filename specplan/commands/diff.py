"""`specplan diff`: the first divergence across ranks' traces, or one run's acceptance against another's."""

from __future__ import annotations

from specplan.commands.common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM
from specplan.commands.fit import echo


def run(traces: tuple[str, ...], *, acceptance: bool, threshold: float) -> int:
    if acceptance:
        return _acceptance(traces, threshold)
    from specplan.trace import first_divergence
    from specplan.trace_input import load_traces

    records = load_traces(list(traces))  # every line checked: bad input is exit 2 with file:line
    found = first_divergence(records)
    if found is None:
        n = sum(len(r) for r in records.values())
        echo(f"no divergence: {len(records)} ranks, {n} records")
        return 0
    echo(found.render())
    return EXIT_FOUND_PROBLEM


def _acceptance(runs: tuple[str, ...], threshold: float) -> int:
    from specplan.trace import acceptance, mixed_plans, shortfall

    if len(runs) != 2:
        echo(f"diff --acceptance: takes two runs, RUN_A RUN_B (their trace dirs); "
                   f"given {len(runs)}", err=True)
        return EXIT_BAD_INPUT
    found = []
    for run in runs:
        mixed = mixed_plans([run])
        if mixed:
            echo(mixed, err=True)
            return EXIT_BAD_INPUT
        acc = acceptance(run)
        if acc is None:
            echo(f"{run}: no accepted-length records (a trace written by Runtime.accept "
                       f"or Runtime.record_acceptance with runtime.trace_dir set)", err=True)
            return EXIT_BAD_INPUT
        found.append(acc)
    a, b = found
    short = shortfall(a, b)
    echo(a.render("A"))
    echo(b.render("B"))
    if short * 100 > threshold:
        echo(f"acceptance drop: B falls short of A by {short:.2%} (threshold {threshold:g}%)")
        return EXIT_FOUND_PROBLEM
    echo(f"acceptance holds: B is within {threshold:g}% of A ({-short:+.2%})")
    return 0
