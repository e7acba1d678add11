"""`specplan simulate` as one rank of a torchrun job, so a deployment wider than one machine
is simulated across machines:

    torchrun --nnodes 2 --nproc-per-node 2 --node-rank R --master-addr HOST --master-port P \\
        -m specplan simulate SPEC --rounds N

Every rank plans the same sim spec (planning is deterministic), refuses a world size that is
not the spec's (exit 2, naming both) before any collective, runs its rank over gloo (TCP, so
the nodes may be separate machines; it binds the CPU), and hands its result to global rank 0
through the job's TCP store (MASTER_ADDR:MASTER_PORT). Rank 0 prints the report and the
verdict and publishes the exit code; every rank exits with it, 0, 3 or 2 alike.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import tempfile
import time
import traceback
from pathlib import Path

import click

ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
PREFIX = "specplan/simulate"
EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM = 2, 3


def under_torchrun() -> bool:
    """Whether this process is one rank of a torchrun (or any env://) job."""
    return all(os.environ.get(k) for k in ENV)


def world_refusal(world: int, plan_world: int, name: str) -> str | None:
    if world == plan_world:
        return None
    return (f"torchrun started {world} ranks (WORLD_SIZE={world}), but spec {name} is for "
            f"{plan_world} ranks: start --nnodes x --nproc-per-node = {plan_world} processes")


def simulate_rank(spec_path: str, spec, *, rounds: int, requests: int, seed: int,
                  max_layers: int, inject: str | None, allow_errors: bool, as_json: bool,
                  trace_dir: str | None, console, reports, timeout_s: float | None = None) -> None:
    """This rank's part of the run; every rank of the job leaves with the same exit code.
    Rank 0 prints through `reports` (commands/sim_run.py: `report`, `refused_by_check`,
    `refused_launch`), as simulate without torchrun does."""
    from specplan.sim.launch import Options

    from specplan.sim.bounds import NOT_UNDER_TORCHRUN

    if inject in NOT_UNDER_TORCHRUN:
        raise click.UsageError(f"--inject {inject} is not run under torchrun (the local launcher "
                               "runs it: simulate without torchrun)")
    opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers, inject=inject or "",
                  timeout_s=timeout_s)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    sim_dir = Path(tempfile.mkdtemp(prefix=f"specplan-sim-rank{rank}-"))
    code = 1
    try:
        code = _rank(spec_path, spec, opt, rank, world, sim_dir, allow_errors=allow_errors,
                     as_json=as_json, trace_dir=trace_dir, console=console, reports=reports)
    finally:
        shutil.rmtree(sim_dir, ignore_errors=True)
    _leave(code, rank, world)


def _rank(spec_path, spec, opt, rank, world, sim_dir, *, allow_errors, as_json, trace_dir,
          console, reports) -> int:
    from specplan.sim.bounds import check_options, refusal
    from specplan.sim.launch import write_config
    from specplan.sim.setup import prepare

    prep = prepare(spec, sim_dir, requests=opt.requests, max_layers=opt.max_layers, seed=opt.seed,
                   timeout_s=opt.timeout_s)
    why = world_refusal(world, prep.plan.world_size, spec.name)
    if why:
        click.echo(f"{spec_path}: {why}", err=True)
        return EXIT_BAD_INPUT
    sp = prep.plan.speculative
    check_options(rounds=opt.rounds, requests=opt.requests, width=sp.num_draft_tokens)
    if why := refusal(sp.method, sp.sampling, opt.inject, len(prep.plan.pipeline.stages), bool(sp.taps),
                      tuple(g.name for g in prep.plan.gates)):
        raise click.UsageError(why)
    if _refused_by_check(spec, rank, allow_errors, as_json, reports):
        return EXIT_FOUND_PROBLEM
    if trace_dir is not None:
        _trace_into(trace_dir, rank)
    write_config(sim_dir, prep, opt)
    t0 = time.monotonic()
    result = _run(sim_dir, rank)
    return _share(prep, opt, rank, world, result, time.monotonic() - t0, sim_dir, trace_dir,
                  as_json, console, reports.report)


def _key() -> str:
    return f"{PREFIX}/{os.environ.get('TORCHELASTIC_RUN_ID', 'run')}"


def _leave(code: int, rank: int, world: int, timeout_s: float = 30.0) -> None:
    """Every rank leaves at once with the same code: torchrun's agent ends a node's other
    ranks (SIGTERM) as soon as one exits non-zero, and a late rank's code would read -15. The
    rank already knows its code, so it ignores that SIGTERM (the agent waits for it to exit, and
    records the code it exits with) and leaves within `timeout_s` whatever the other ranks do."""
    import signal
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":  # no store outlives the ranks
        os._exit(code)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        store, key = _store(timeout_s), _key()
        store.set(f"{key}/exit{rank}", str(code))
        store.wait([f"{key}/exit{r}" for r in range(world)], datetime.timedelta(seconds=timeout_s))
    except Exception:  # noqa: BLE001 - a rank that never arrives: leave anyway, with our code
        pass
    os._exit(code)


def _refused_by_check(spec, rank: int, allow_errors: bool, as_json: bool, reports) -> bool:
    """simulate and check never disagree: a spec with an ERROR is not run (rank 0 says why)."""
    from specplan.plan.build import compile
    from specplan.verify import has_errors, verify

    plan = compile(spec)
    findings = verify(plan)
    if not has_errors(findings):
        return False
    if allow_errors:  # run anyway, unless the engine's launch is what fails (rank 0 says so)
        if not isinstance(plan.launch_refusal, str):
            return False
        if rank == 0:
            reports.refused_launch(plan, as_json)
        return True
    if rank == 0:
        reports.refused_by_check(plan, findings, as_json)
    return True


def _trace_into(trace_dir: str, rank: int) -> None:
    """Each rank checks its own file only: the job's ranks start at different times."""
    mine = Path(trace_dir) / f"rank{rank}.jsonl"
    if mine.exists():
        raise click.UsageError(f"--trace-dir {trace_dir} already holds {mine.name}: give a new "
                               "or empty folder, one run per folder")
    os.environ["SPECPLAN_TRACE_DIR"] = str(Path(trace_dir).resolve())


def _run(sim_dir: Path, rank: int) -> dict:
    """The rank's result, or its error as the local launcher's ranks record it."""
    from specplan.sim import worker

    try:
        return worker.run(sim_dir, rank)
    except Exception as exc:  # every failure becomes this rank's result
        known = any(c.__name__ == "RuntimeDivergence" for c in type(exc).__mro__)
        detail = f"{type(exc).__name__}: {exc}"
        if not known:
            detail += "\n" + traceback.format_exc()
        return {"rank": rank, "error": detail, "known": known, "crashed": True}


def _store(deadline_s: float):
    import torch.distributed as dist

    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                         timeout=datetime.timedelta(seconds=deadline_s))


def _share(prep, opt, rank: int, world: int, result: dict, wall_s: float, sim_dir: Path,
           trace_dir, as_json: bool, console, report) -> int:
    """Hand the result to rank 0; rank 0 reports and publishes the code every rank exits with."""
    deadline = 120 + 3.0 * opt.rounds * world
    key = _key()
    store = _store(deadline)
    store.set(f"{key}/rank{rank}", json.dumps(result))
    if rank != 0:
        code = int(store.get(f"{key}/code").decode())  # waits for rank 0, up to the deadline
        store.set(f"{key}/ack{rank}", "1")
        return code
    results, notes = _gather(store, key, world, deadline)
    from specplan.sim.launch import Outcome

    codes: dict[int, int | None] = {r: 3 if x.get("error") else 0 for r, x in results.items()}
    outcome = Outcome(prep, opt, results, codes, wall_s, sim_dir, notes, trace_dir)
    code = report(outcome, opt.inject, console, as_json)
    import sys

    sys.stdout.flush()  # the report is out before any rank may leave
    store.set(f"{key}/code", str(code))
    _wait_acks(store, key, [r for r in range(1, world) if r in results])
    return code


def _gather(store, key: str, world: int, deadline_s: float) -> tuple[dict[int, dict], list[str]]:
    end = time.monotonic() + deadline_s
    results: dict[int, dict] = {}
    while len(results) < world and time.monotonic() < end:
        for r in range(world):
            if r not in results and store.check([f"{key}/rank{r}"]):
                results[r] = json.loads(store.get(f"{key}/rank{r}"))
        time.sleep(0.05)
    missing = [r for r in range(world) if r not in results]
    for r in missing:
        results[r] = {"rank": r, "error": "no result (the rank ended without reporting)"}
    notes = [f"ranks {missing} reported nothing within {deadline_s:g}s"] if missing else []
    return results, notes


def _wait_acks(store, key: str, ranks: list[int], timeout_s: float = 30.0) -> None:
    """Rank 0 may host the store: it stays until every rank has read the code."""
    end = time.monotonic() + timeout_s
    while ranks and time.monotonic() < end:
        ranks = [r for r in ranks if not store.check([f"{key}/ack{r}"])]
        time.sleep(0.05)
