"""The body of `specplan simulate` once check agrees: progress per round, the run of the whole
topology (sim/launch.py), or the serving loop under --chunked-prefill (sim/serving_launch.py),
the report and an exit code; and what a torchrun rank 0 prints (sim/torchrun.py calls back)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, EXIT_INTERNAL, EXIT_OK  # noqa: F401
from specplan.sim.bounds import faults

SERVING_INJECTIONS = faults("serving")


def run_simulate(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int,
                 inject: str | None, console, as_json: bool = False, chunk: int | None = None,
                 trace_dir: str | None = None, timeout_s: float | None = None) -> int:
    """Progress per round on stderr; the report (text, or with `as_json` the JSON object of
    sim/report.py `report_json`) on stdout. With `chunk`, the serving loop of sim/serving.py.
    With `trace_dir`, every rank writes its runtime trace there (sim/traces.py)."""
    from specplan.sim.traces import trace_into

    with trace_into(trace_dir) if trace_dir is not None else contextlib.nullcontext():
        if chunk is not None or inject in SERVING_INJECTIONS:  # the serving loop (sim/serving.py)
            if chunk is None or inject not in (None, *SERVING_INJECTIONS):
                raise click.UsageError(f"--inject {inject} needs --chunked-prefill" if chunk is None else
                                       f"--chunked-prefill takes --inject {' or '.join(SERVING_INJECTIONS)}, "
                                       f"not {inject}")
            if as_json:
                raise click.UsageError("--json reports a topology run; --chunked-prefill prints its own report")
            return run_serving(spec, chunk=chunk, requests=requests, seed=seed, inject=inject or "",
                               console=console)
        from specplan.sim.launch import Options, simulate
        from specplan.sim.progress import RoundProgress

        opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                      inject=inject or "", timeout_s=timeout_s)
        with RoundProgress(rounds) as progress:
            outcome = simulate(spec, opt, on_round=progress.update)
            if not outcome.results.get(0, {}).get("error"):  # rounds finished after the last poll
                progress.update(rounds)
        outcome.trace_dir = trace_dir
        return report(outcome, inject, console, as_json)


def report(outcome, inject: str | None, console, as_json: bool) -> int:
    """The verdict of a finished run, printed (text or JSON), as an exit code."""
    from specplan.sim.report import render, report_json, verdict

    v = verdict(outcome)
    if not v.ok and not inject and (slow := too_slow(outcome)):
        v.problems.append(slow)
    internal = [r for r, x in outcome.results.items() if x.get("known") is False]
    code = EXIT_OK if v.ok else EXIT_INTERNAL if internal and not inject else EXIT_FOUND_PROBLEM
    if as_json:
        sys.stdout.write(json.dumps(report_json(outcome, v, code), separators=(",", ":")) + "\n")
        return code
    render(outcome, v, console)
    if v.ok:
        return EXIT_OK
    if internal and not inject:
        for r in internal:
            console.print(f"rank {r} hit an internal error:\n{outcome.results[r]['error']}",
                          markup=False)
        return EXIT_INTERNAL
    return EXIT_FOUND_PROBLEM


def too_slow(outcome) -> str | None:
    """A collective that timed out in a plan `check` finds no hang or desync in: the machine was
    too slow for the timeout, not the plan wrong."""
    from specplan.verify import has_errors, verify

    errors = [x.get("error") or "" for x in outcome.results.values()]
    if not any(e.startswith("CollectiveTimeout") for e in errors):
        return None
    plan = outcome.prepared.plan
    if has_errors(verify(plan)):
        return None  # the hang check predicts
    return (f"check finds no hang in this plan: a rank waited the collectives' timeout "
            f"({plan.runtime.timeout_s:g} s) for a peer too slow on this machine; rerun with a larger "
            f"--timeout-s")


def refused_launch(plan, as_json: bool) -> int:
    """The failure a launch refusal predicts, as it happens: the engine does not start, so no
    rank runs a round (even under --allow-errors)."""
    line = (f"{plan.engine} refuses to launch this topology: {plan.launch_refusal} "
            "(as the engine's own launch would: nothing was run)")
    if as_json:
        click.echo(json.dumps({"name": plan.name, "world_size": plan.world_size,
                               "method": plan.speculative.method, "sampling": plan.speculative.sampling,
                               "verdict": {"ok": False, "problems": [line]},
                               "exit_code": EXIT_FOUND_PROBLEM}, separators=(",", ":")))
    else:
        click.echo(f"FAIL: {line}")
    return EXIT_FOUND_PROBLEM


def refused_by_check(plan, findings, as_json: bool) -> int:
    """simulate and check never disagree: the findings check prints, and why nothing ran."""
    from specplan.verify import formats
    from specplan.verify.report import subject_of

    sys.stdout.write(formats.to_json(findings) if as_json else formats.render_text(
        subject_of(plan), findings, width=formats.terminal_width(), verbose=False))
    click.echo("not simulated: `specplan check` predicts the failures above; run with "
               "--allow-errors to watch them happen", err=True)
    return EXIT_FOUND_PROBLEM


def run_serving(spec: str, *, chunk: int, requests: int, seed: int, inject: str, console) -> int:
    """The serving loop (sim/serving_launch.py) of SPEC's plan: its report and exit code."""
    from specplan.schema import load_spec
    from specplan.sim.launch import sim_folder
    from specplan.sim.serving_launch import cpu_plan

    user = load_spec(spec)
    with sim_folder("specplan-serving-") as where:
        plan = cpu_plan(user, where)
        return _serve(spec, plan, user.topology.device, chunk=chunk, requests=requests, seed=seed,
                      inject=inject, console=console, sim_dir=where)


def _serve(spec: str, plan, device: str, *, chunk: int, requests: int, seed: int, inject: str,
           console, sim_dir: Path) -> int:
    from specplan.sim.serving import make_requests
    from specplan.sim.serving_launch import collect, config_from_plan, launch, report

    cfg = config_from_plan(plan, chunk=chunk, inject=inject, seed=seed)
    if plan.world_size != cfg.pp:
        console.print(f"{spec}: --chunked-prefill runs one process per pipeline stage; this spec has "
                      f"{plan.world_size} ranks for {cfg.pp} stages (set tp, dp and cp to 1)",
                      markup=False, highlight=False)
        return EXIT_BAD_INPUT
    if device != "cpu":
        console.print(f"runs on the CPU (gloo), one process per stage: topology.device {device} "
                      f"is not used", markup=False, highlight=False)
    reqs = make_requests(requests, seed, chunk)
    results, notes = launch(plan, cfg, reqs, sim_dir)
    outcome, failed = collect(cfg, reqs, results)
    if failed:
        for line in failed + notes:
            console.print(line, markup=False, highlight=False)
        return EXIT_INTERNAL
    for line in report(cfg, outcome, requests):
        console.print(line, markup=False, highlight=False)
    return EXIT_OK if outcome.error is None and outcome.first_wrong is None else EXIT_FOUND_PROBLEM
