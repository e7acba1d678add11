"""One sim rank: `python -m specplan.sim.worker SIM_DIR` with RANK, WORLD_SIZE, MASTER_*.

Reads SIM_DIR/sim.json, binds its plan (SIM_DIR/plan.json, or the plan sim.json names for
this rank), runs the prefill and the decode rounds, and writes SIM_DIR/rank<R>.json: the
tokens of each request it serves, timings, collectives. Exit 0 done, 3 a divergence or a
collective that failed or timed out (the error is in the result file), 1 an internal bug.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

EXIT_FOUND_PROBLEM = 3


def _config(sim_dir: Path):
    from specplan.sim.engine import SimConfig
    from specplan.sim.model import ModelConfig

    raw = json.loads((sim_dir / "sim.json").read_text())
    model = ModelConfig(**{**raw["model"], "taps": tuple(raw["model"]["taps"])})
    return raw, SimConfig(**{**raw["sim"], "model": model})


def run(sim_dir: Path, rank: int) -> dict:
    import torch

    from specplan.runtime import bind
    from specplan.sim import gates, rounds
    from specplan.sim.engine import Engine

    torch.set_num_threads(1)
    raw, sim = _config(sim_dir)
    plan = raw.get("plans", {}).get(str(rank), str(sim_dir / "plan.json"))
    t_bind = time.perf_counter()
    rt = bind(plan, device="cpu", rendezvous_s=raw.get("rendezvous_s"))  # the plan keeps the spec's device
    e = Engine(rt, sim)
    rounds.startup(e)
    gates.run(e, "startup")
    gates.run(e, "prefill")
    rounds.prefill(e)
    started, elapsed = decode_rounds(e, sim, rank)
    rt.close()
    return {**decoded(e, rank, elapsed, bind_s=started - t_bind),
            "prompts": {str(q): e.tokens[b][: e.prompt_lens[b]] for b, q in enumerate(e.requests)}}


def decode_rounds(e, sim, rank: int) -> tuple[float, float]:
    """Run the decode rounds (the `kill` injection included); (start time, seconds taken)."""
    from specplan.sim import gates, rounds

    e.timers.clear()  # the report's phases are the decode rounds'
    started = time.perf_counter()
    for r in range(1, sim.rounds + 1):
        if sim.inject == "kill" and rank == sim.kill_rank and r == sim.kill_round:
            os.kill(os.getpid(), signal.SIGKILL)
        e.round = e.comm.round = r
        if r == 1:
            gates.run(e, "decode")
        rounds.decode(e)
        if sim.progress and rank == 0:
            Path(sim.progress).write_text(f"{r}\n")
    return started, time.perf_counter() - started


def decoded(e, rank: int, elapsed: float, bind_s: float) -> dict:
    """A rank's record after its decode rounds, as the report reads it."""
    rounds_run = e.sim.rounds
    return {"rank": rank, "replica": e.rt.replica, "stage": e.stage, "requests": e.requests,
            "tokens": {str(q): e.tokens[b][e.prompt_lens[b]:] for b, q in enumerate(e.requests)},
            "commits": {str(k): v for k, v in e.commits.items()},
            "timers": dict(e.timers), "decode_s": elapsed, "bind_s": bind_s,
            "calls": _per_round(e.comm.calls, e.runtime_calls, rounds_run),
            "bytes": _per_round(e.comm.bytes, e.runtime_bytes, rounds_run),
            "runtime_calls": sum(e.runtime_calls[r] for r in range(1, rounds_run + 1)),
            "predicted": {str(q): e.predicted[b] for b, q in enumerate(e.requests)} if e.last else {},
            "scores": {str(q): e.scores[b] for b, q in enumerate(e.requests)} if e.last else {},
            "error": None}


def _per_round(model, runtime, rounds: int) -> float:
    return sum(model[r] + runtime[r] for r in range(1, rounds + 1)) / max(1, rounds)


def rank_main(argv: list[str], run) -> None:
    """A rank process's entry: `run(sim_dir, rank)` returns its result (or (result, exit code));
    every failure still leaves rank<R>.json behind, a known divergence exiting 3."""
    sim_dir = Path(argv[0])
    rank = int(os.environ["RANK"])
    out = sim_dir / f"rank{rank}.json"
    try:
        result = run(sim_dir, rank)
    except BaseException as exc:  # every failure leaves a result file behind
        # By class name: the runtime itself may be what failed to import.
        known = any(c.__name__ == "RuntimeDivergence" for c in type(exc).__mro__)
        detail = f"{type(exc).__name__}: {exc}"
        if not known:
            detail += "\n" + traceback.format_exc()
        out.write_text(json.dumps({"rank": rank, "error": detail, "known": known, "crashed": True}))
        sys.stderr.write(detail + "\n")
        sys.stderr.flush()
        os._exit(EXIT_FOUND_PROBLEM if known else 1)
    result, code = result if isinstance(result, tuple) else (result, 0)
    out.write_text(json.dumps(result))
    sys.stdout.flush()
    os._exit(code)


def main(argv: list[str]) -> None:
    rank_main(argv, run)


if __name__ == "__main__":
    main(sys.argv[1:])
