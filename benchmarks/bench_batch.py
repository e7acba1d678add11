"""Batch identity's cost against the converge it guards, on gloo, 2/4/8 ranks.

    .venv/bin/python benchmarks/bench_batch.py [--iters 300] [--live 64] [--worlds 2,4,8]

Per world size, one run measures side by side (alternating every iteration) the DSpark accept
boundary (`rt.converge("dspark_accept_greedy")`, three fields, guard header, one broadcast of the
family's buffer) without batch identity (`requests=None`: the header's batch word stays 0) and
with it (`requests=Batch(ids, generations)`, int64 tensors of the live rows: the digest of
(request, generation) per row on the host, the word written and compared, the call noted for
naming rows on a mismatch). Also the digest alone. Reported: median microseconds per call on
the source rank, and the ratio with / without.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

from bench_converge import compile_plan, run_world
from shared import options


def timed(fn) -> float:
    dist.barrier()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def worker(rank: int, n: int, port: int, plan, iters: int, live: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    from specplan.runtime import bind
    from specplan.runtime.batch import Batch, digest_host

    torch.manual_seed(0)
    rt = bind(plan, rank=rank, world_size=n)
    values = {"correct_len_greedy": torch.randint(0, 4, (live,), dtype=torch.int32),
              "bonus_greedy": torch.randint(0, 1000, (live,)),
              "cap_trim_lens_greedy": torch.zeros(live, dtype=torch.int32)}
    batch = Batch(torch.arange(1000, 1000 + live), torch.randint(0, 8, (live,)))
    site = "dspark_accept_greedy"
    for i in range(10):  # warm both (layouts at these live rows, gloo pairs)
        rt.converge(site, values, round=-1 - i, live_rows=live)
        rt.converge(site, values, round=-1 - i, live_rows=live, requests=batch)
    off, on = [], []
    for i in range(iters):
        off.append(timed(lambda: rt.converge(site, values, round=2 * i, live_rows=live)))
        on.append(timed(lambda: rt.converge(site, values, round=2 * i + 1, live_rows=live,
                                            requests=batch)))
    alone = []
    for _ in range(iters):
        start = time.perf_counter()
        digest_host(batch, live)
        alone.append(time.perf_counter() - start)
    rt.close()
    if rank == 0:
        out.put((statistics.median(off), statistics.median(on), statistics.median(alone)))


def main() -> None:
    args, worlds = options(None, "worlds", "2,4,8", iters=300, live_help="live rows per round (capacity 256)")
    torch.set_num_threads(1)
    print(f"gloo, dspark_accept_greedy, live rows {args.live} of 256, median of {args.iters} calls "
          f"per side, alternating")
    print(f"{'ranks':>5} {'converge us':>12} {'+ identity us':>14} {'ratio':>6} {'digest alone us':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in worlds:
            plan = compile_plan(Path(tmp), "dspark", n)
            out = run_world(worker, n, plan, args)
            off, on, alone = out.get()
            print(f"{n:>5} {off * 1e6:>12.0f} {on * 1e6:>14.0f} {on / off:>6.2f} {alone * 1e6:>16.1f}")


if __name__ == "__main__":
    main()
