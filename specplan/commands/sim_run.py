"""The body of `specplan simulate` once check agrees: progress per round, the run of the whole
topology (sim/launch.py), or the serving loop under --chunked-prefill (sim/serving_launch.py),
the report and an exit code; and what a torchrun rank 0 prints (sim/torchrun.py calls back)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import click

from specplan.commands import fit
from specplan.commands.target import Report, Simulation
from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, EXIT_INTERNAL, EXIT_OK
from specplan.sim.bounds import faults

if TYPE_CHECKING:
    from specplan.commands.fit import FittingConsole
    from specplan.plan import Plan
    from specplan.sim.launch import Outcome
    from specplan.sim.report import Verdict
    from specplan.verify.findings import Finding

SERVING_INJECTIONS = faults("serving")


def refuse_serving(sim: Simulation) -> None:
    """The serving loop's options together: its faults need --chunked-prefill, which takes only
    them and prints its own report (no --json)."""
    if sim.chunk is None and sim.inject not in SERVING_INJECTIONS:
        return
    if sim.chunk is None or sim.inject not in (None, *SERVING_INJECTIONS):
        raise click.UsageError(f"--inject {sim.inject} needs --chunked-prefill" if sim.chunk is None
                               else f"--chunked-prefill takes --inject "
                                    f"{' or '.join(SERVING_INJECTIONS)}, not {sim.inject}")
    if sim.as_json:
        raise click.UsageError("--json reports a topology run; --chunked-prefill prints its own report")


def run_simulate(spec: str, sim: Simulation, console: FittingConsole) -> int:
    """Progress per round on stderr; the report (text, or with `as_json` the JSON object of
    sim/report.py `report_json`) on stdout. With `chunk`, the serving loop of sim/serving.py.
    With `trace_dir`, every rank writes its runtime trace there (sim/traces.py)."""
    from specplan.sim.progress import RoundProgress

    if sim.chunk is not None:  # the serving loop (sim/serving.py)
        with _traced(sim):
            return run_serving(spec, chunk=sim.chunk, requests=sim.requests, seed=sim.seed,
                               inject=sim.inject or "", console=console)
    with _traced(sim), RoundProgress(sim.rounds) as progress:
        outcome = topology_run(spec, sim, on_round=progress.update)
        if not outcome.results.get(0, {}).get("error"):  # rounds finished after the last poll
            progress.update(sim.rounds)
    outcome.trace_dir = sim.trace_dir
    return report(outcome, sim.inject, console, sim.as_json)


def _traced(sim: Simulation) -> contextlib.AbstractContextManager[Any]:
    from specplan.sim.traces import trace_into

    return trace_into(sim.trace_dir) if sim.trace_dir is not None else contextlib.nullcontext()


def topology_run(spec: str, sim: Simulation, on_round: Callable[[int], None] | None = None) -> Outcome:
    """The whole topology of the spec at `spec`, one process per rank (sim/launch.py)."""
    from specplan.sim.launch import Options, simulate

    opt = Options(rounds=sim.rounds, requests=sim.requests, seed=sim.seed,
                  max_layers=sim.max_layers, inject=sim.inject or "", timeout_s=sim.timeout_s)
    return simulate(spec, opt, on_round) if on_round is not None else simulate(spec, opt)


def outcome_report(spec: str | Path, sim: Simulation) -> Report:
    """The run the CLI makes, as the API's Report (the verdict report() prints)."""
    with _traced(sim):
        outcome = topology_run(str(spec), sim)
    v = verdict_of(outcome, sim.inject)
    return Report(v.ok, tuple(v.problems), v.checked, v.agreed, len(outcome.results), sim.rounds,
                  outcome.wall_s)


def verdict_of(outcome: Outcome, inject: str | None) -> Verdict:
    """The run's verdict; a collective that timed out under a plan check finds no hang in is
    named as the machine's slowness."""
    from specplan.sim.report import verdict

    v = verdict(outcome)
    if not v.ok and not inject and (slow := too_slow(outcome)):
        v.problems.append(slow)
    return v


def report(outcome: Outcome, inject: str | None, console: FittingConsole, as_json: bool) -> int:
    """The verdict of a finished run, printed (text or JSON), as an exit code."""
    from specplan.sim.report import render, report_json

    v = verdict_of(outcome, inject)
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


def too_slow(outcome: Outcome) -> str | None:
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


def launch_refused(plan: Plan) -> str | None:
    """The verdict of a plan its engine refuses to launch: no rank runs a round (even under
    --allow-errors); None when the engine launches it."""
    if not isinstance(plan.launch_refusal, str):
        return None
    return (f"{plan.engine} refuses to launch this topology: {plan.launch_refusal} "
            "(as the engine's own launch would: nothing was run)")


def refused_launch(plan: Plan, as_json: bool) -> int:
    """The failure a launch refusal predicts, as it happens: the engine does not start, so no
    rank runs a round (even under --allow-errors)."""
    line = launch_refused(plan)
    if as_json:
        click.echo(json.dumps({"name": plan.name, "world_size": plan.world_size,
                               "method": plan.speculative.method, "sampling": plan.speculative.sampling,
                               "verdict": {"ok": False, "problems": [line]},
                               "exit_code": EXIT_FOUND_PROBLEM}, separators=(",", ":")))
    else:
        fit.echo(f"FAIL: {line}")
    return EXIT_FOUND_PROBLEM


def refused_by_check(plan: Plan, findings: list[Finding], as_json: bool) -> int:
    """simulate and check never disagree: the findings check prints, and why nothing ran."""
    print_not_simulated(plan, findings, as_json)
    return EXIT_FOUND_PROBLEM


def print_not_simulated(plan: Plan, findings: Sequence[Finding], as_json: bool) -> None:
    """The findings check prints, and why nothing ran."""
    from specplan.verify import formats
    from specplan.verify.report import subject_of

    sys.stdout.write(formats.to_json(list(findings)) if as_json else formats.render_text(
        subject_of(plan), list(findings), width=formats.terminal_width(), verbose=False))
    fit.echo("not simulated: `specplan check` predicts the failures above; run with "
             "--allow-errors to watch them happen", err=True)


def run_serving(spec: str, *, chunk: int, requests: int, seed: int, inject: str,
                console: FittingConsole) -> int:
    """The serving loop (sim/serving_launch.py) of SPEC's plan: its report and exit code."""
    from specplan.schema import load_spec
    from specplan.sim.launch import sim_folder
    from specplan.sim.serving_launch import cpu_plan

    user = load_spec(spec)
    with sim_folder("specplan-serving-") as where:
        plan = cpu_plan(user, where)
        return _serve(spec, plan, user.topology.device, chunk=chunk, requests=requests, seed=seed,
                      inject=inject, console=console, sim_dir=where)


def _serve(spec: str, plan: Plan, device: str, *, chunk: int, requests: int, seed: int,
           inject: str, console: FittingConsole, sim_dir: Path) -> int:
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
