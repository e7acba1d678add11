"""Preflight: run every planned collective of one round, with its exact sizes and headers.

    torchrun --nproc-per-node N -m specplan.runtime.preflight plan.json [--rounds K]

Each rank binds the plan (so the fingerprint agreement runs first), then walks its stage's
program for the startup, prefill and decode rounds: every fused converge and relay with its
guard header and its buffer at capacity, and the DP token-count exchange, each compared with
plan.json: the bytes sent must equal the op's `bytes`, byte for byte. Rank 0 prints the
latency per group; exit 0 when every collective matched, 3 on any mismatch or timeout (the
error names site, round and ranks, or what was sent differs from plan.json), 2 on a bad
argument or a plan.json that is malformed or was edited after compile.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

from specplan.ir.nodes import ROUNDS
from specplan.plan import PlanFileError, load_plan
from specplan.runtime import steps
from specplan.runtime.errors import RuntimeDivergence, WireMismatch
from specplan.runtime.runtime import DTYPES, Runtime, bind

TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _values(rt: Runtime, b) -> dict:
    rows = rt.plan.max_batch
    return {f.decision: torch.zeros(rt.plan.live_shape(f, rows), dtype=DTYPES[f.dtype], device=rt.device)
            for f in b.fields}


def run_round(rt: Runtime, round_: int, timings: dict) -> int:
    """One pass over the stage's programs; returns the number of collectives run. Before each,
    the bytes this rank is about to send are compared with the op's `bytes` in plan.json."""
    stage, n = rt.plan.stage_of(rt.rank), 0
    for name in ROUNDS:
        for op in rt.plan.plan.rank_class(stage).program.round(name):
            if op.kind not in ("boundary", "relay", "dp"):
                continue  # forwards and stage handoffs are the engine's
            start = time.perf_counter()
            sent = _run(rt, op, round_)
            _compare(rt, op, name, sent)
            key = (op.family, tuple(rt.ranks[op.family]))
            timings.setdefault(key, []).append(time.perf_counter() - start)
            n += 1
    return n


def _run(rt: Runtime, op, round_: int) -> int:
    """Run one planned collective at capacity; returns the bytes the runtime sent."""
    rows = rt.plan.max_batch
    if op.kind == "dp":
        return steps.exchange_token_counts(rt, None, round=round_).numel() * 4
    b = rt.plan.boundaries[op.boundary] if op.kind == "boundary" else rt.plan.relay_of(op.site)
    assert b is not None  # a planned relay op names a relay site
    source = rt.ranks[b.family][b.source_member]
    mine = _values(rt, b) if rt.rank == source or b.op == "all_reduce_min" else None
    if op.kind == "boundary":
        rt.converge(b.id, mine, round=round_, live_rows=rows)
    else:
        rt.relay(op.site, mine, round=round_, live_rows=rows)
    return rt.wire_bytes(b)


def _compare(rt: Runtime, op, round_kind: str, sent: int) -> None:
    if op.bytes is None or sent == op.bytes:
        return  # null: a width known only at run time, which `specplan check` refuses
    what = {"boundary": f"boundary {op.boundary}", "relay": f"relay {op.site}"}.get(op.kind, "dp_token_counts")
    raise WireMismatch(
        f"rank {rt.rank} sent {sent} bytes for {what} ({op.op} over {op.family}) in the "
        f"{round_kind} round, but plan.json says {op.bytes}: the runtime and the plan disagree")


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
    missing = [k for k in TORCHRUN_ENV if not os.environ.get(k)]
    how = (f"preflight runs one process per rank under torchrun, which sets {', '.join(TORCHRUN_ENV)} "
           f"(missing here: {', '.join(missing)}); run it as\n  torchrun --nproc-per-node N "
           f"-m specplan.runtime.preflight {args.plan}\nwith N the plan's ranks on this node "
           "(add --nnodes, --node-rank and --master-addr across nodes)")
    try:
        plan = load_plan(args.plan)  # bad input (exit 2) before any process group starts
    except PlanFileError as exc:
        print(exc, file=sys.stderr)
        if missing:
            print(how, file=sys.stderr)
        return 2
    if missing:
        print(how, file=sys.stderr)
        return 2
    try:
        rt = bind(plan)
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
