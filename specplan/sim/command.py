"""The body of `specplan simulate`: a progress bar, the run, the report, an exit code."""

from __future__ import annotations

EXIT_OK, EXIT_INTERNAL, EXIT_FOUND_PROBLEM = 0, 1, 3


def run_simulate(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int,
                 inject: str | None, console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from specplan.sim.launch import Options, simulate
    from specplan.sim.report import render, verdict

    opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                  inject=inject or "")
    columns = (TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), TextColumn("rounds"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("rounds", total=rounds)
        outcome = simulate(spec, opt, on_round=lambda r: bar.update(task, completed=r))
    v = verdict(outcome)
    render(outcome, v, console)
    if v.ok:
        return EXIT_OK
    internal = [r for r, x in outcome.results.items() if x.get("known") is False]
    if internal and not inject:
        for r in internal:
            console.print(f"rank {r} hit an internal error:\n{outcome.results[r]['error']}",
                          markup=False)
        return EXIT_INTERNAL
    return EXIT_FOUND_PROBLEM
