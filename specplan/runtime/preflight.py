"""Preflight: run every planned collective of one round, with its exact sizes and headers.

    torchrun --nproc-per-node N -m specplan.runtime.preflight plan.json [--rounds K]

Each rank binds the plan (so the fingerprint agreement runs first), then walks its stage's
program for the startup, prefill and decode rounds: every fused converge and relay with its
guard header and its buffer at capacity, and the DP token-count exchange. Rank 0 prints the
latency per group; exit 0 when every collective matched, 3 on any mismatch or timeout (the
error names site, round and ranks), 2 on a bad argument.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

from specplan.runtime.errors import RuntimeDivergence
from specplan.runtime.runtime import DTYPES, Runtime, bind

ROUNDS = ("startup", "prefill", "decode")
TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _values(rt: Runtime, b) -> dict:
    rows = rt.plan.max_batch
    return {f.decision: torch.zeros(rt.plan.live_shape(f, rows), dtype=DTYPES[f.dtype], device=rt.device)
            for f in b.fields}


def _dp(rt: Runtime, op: dict) -> None:
    group, ranks = rt.groups[op["family"]], rt.ranks[op["family"]]
    ints = op["bytes"] // 4 // len(ranks)
    mine = torch.zeros(ints, dtype=torch.int32, device=rt.device)
    if op["op"] == "all_gather":
        work = dist.all_gather([torch.empty_like(mine) for _ in ranks], mine, group=group, async_op=True)
    else:
        work = dist.all_reduce(torch.zeros(ints * len(ranks), dtype=torch.int32, device=rt.device),
                               group=group, async_op=True)
    from specplan.runtime.plan_view import Boundary
    rt._wait(work, Boundary(-3, "decode", op["family"], op["op"], 0, ("dp_token_counts",), (), 0, 0), 0)


def run_round(rt: Runtime, round_: int, timings: dict) -> int:
    """One pass over the stage's programs; returns the number of collectives run."""
    stage, n = rt.plan.stage_of(rt.rank), 0
    for name in ROUNDS:
        for kind, what in rt.plan.program(stage, name):
            start = time.perf_counter()
            if kind == "boundary":
                b = rt.plan.boundaries[what]
                source = rt.ranks[b.family][b.source_member]
                rt.converge(what, _values(rt, b) if rt.rank == source or b.op != "broadcast" else None,
                            round=round_, live_rows=rt.plan.max_batch)
                family = b.family
            elif kind == "relay":
                r = rt.plan.relay_of(what)
                last = rt.ranks["pp"][-1]
                rt.relay(what, _values(rt, r) if rt.rank == last else None, round=round_,
                         live_rows=rt.plan.max_batch)
                family = "pp"
            else:
                _dp(rt, what)
                family = what["family"]
            key = (family, tuple(rt.ranks[family]))
            timings.setdefault(key, []).append(time.perf_counter() - start)
            n += 1
    return n


def report(rt: Runtime, timings: dict, count: int) -> None:
    everyone: list = [None] * rt.world_size
    dist.all_gather_object(everyone, {k: v for k, v in timings.items()})
    if rt.rank != 0:
        return
    merged: dict = {}
    for t in everyone:
        for key, values in t.items():
            merged.setdefault(key, []).extend(values)
    print(f"preflight {rt.plan.name} ({rt.plan.fingerprint[:16]}): {rt.world_size} ranks on "
          f"{rt.backend}, {count} collectives on rank 0 per round; every header matched")
    print(f"{'family':<16} {'group':<28} {'calls':>6} {'mean ms':>9} {'max ms':>9}")
    for (family, ranks), values in sorted(merged.items()):
        print(f"{family:<16} {str(list(ranks)):<28} {len(values):>6} "
              f"{1e3 * sum(values) / len(values):>9.3f} {1e3 * max(values):>9.3f}")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specplan.runtime.preflight",
                                     description="Run every planned collective once, exactly.")
    parser.add_argument("plan", help="plan.json written by `specplan compile`")
    parser.add_argument("--rounds", type=_positive, default=2,
                        help="passes over the round (first warms up)")
    args = parser.parse_args(argv)
    if not os.path.exists(args.plan):
        print(f"{args.plan}: no such plan file", file=sys.stderr)
        return 2
    missing = [k for k in TORCHRUN_ENV if not os.environ.get(k)]
    if missing:
        print(f"preflight runs one process per rank under torchrun, which sets {', '.join(TORCHRUN_ENV)} "
              f"(missing here: {', '.join(missing)}); run it as\n  torchrun --nproc-per-node N "
              f"-m specplan.runtime.preflight {args.plan}\nwith N the plan's ranks on this node "
              "(add --nnodes, --node-rank and --master-addr across nodes)", file=sys.stderr)
        return 2
    try:
        rt = bind(args.plan)
        timings: dict = {}
        count = 0
        for r in range(args.rounds):
            count = run_round(rt, r, timings if r else {})
        report(rt, timings, count)
        rt.close()
    except RuntimeDivergence as exc:
        print(f"preflight: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 3
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
