"""The body of `specplan simulate`: a progress bar, the run, the report, an exit code."""

from __future__ import annotations

EXIT_OK, EXIT_INTERNAL, EXIT_FOUND_PROBLEM = 0, 1, 3


SERVING_INJECTIONS = ("stale-slot", "early-stop")


def run_simulate(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int,
                 inject: str | None, console, chunk: int | None = None) -> int:
    import click

    if chunk is not None or inject in SERVING_INJECTIONS:  # the serving loop (sim/serving.py)
        if chunk is None or inject not in (None, *SERVING_INJECTIONS):
            raise click.UsageError(f"--inject {inject} needs --chunked-prefill" if chunk is None else
                                   f"--chunked-prefill takes --inject {' or '.join(SERVING_INJECTIONS)}, "
                                   f"not {inject}")
        from specplan.sim.serving_command import run_serving

        return run_serving(spec, chunk=chunk, requests=requests, seed=seed, inject=inject or "",
                           console=console)
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
