"""The converge's two hot paths side by side on gloo, 2/4/8 ranks: host compare vs device flag.

    .venv/bin/python benchmarks/bench_hotpath.py [--iters 200] [--live 64] [--worlds 2,4,8]

One process group per world size, two Runtimes bound on it to the same DSpark plan: one on the
host path (header compared on the host right after each collective, timed waits), one on the
device path forced on the CPU (header compared by device ops into a flag, untimed waits, the
flag read once per round by `check_round`). Alternating every iteration, median of:
- one converge (`dspark_accept_greedy`), source rank;
- one decode round: every boundary of the rank's decode program, then (device path only) the
  round's `check_round`.
Reported for the source (rank 0) and a receiver (rank 1, which compares headers): microseconds
and the ratio device / host. On a CPU the device path's "device ops"
are small CPU ops, so this measures what the device path adds in launches, not what it saves
in host synchronisation: that needs NCCL (benchmarks/gpu_hotpath.py).
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


def decode_inputs(rt, live: int) -> list[tuple[int, dict]]:
    """(boundary id, values) for every boundary of this rank's decode program."""
    view = rt.plan
    out = []
    for kind, what in view.program(view.stage_of(rt.rank), "decode"):
        if kind != "boundary":
            continue
        b = view.boundaries[what]
        values = {}
        for f in b.fields:
            shape = view.live_shape(f, live)
            dtype = {"int32": torch.int32, "int64": torch.int64, "float32": torch.float32,
                     "bool": torch.bool}[f.dtype]
            values[f.decision] = torch.zeros(shape, dtype=dtype)
        out.append((b.id, values))
    return out


def one_round(rt, inputs, r: int, live: int) -> None:
    for bid, values in inputs:
        rt.converge(bid, values, round=r, live_rows=live)
    rt.check_round()


def timed(fn) -> float:
    dist.barrier()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(host, device, live: int, iters: int) -> dict[str, tuple[float, float]]:
    accept = {"correct_len_greedy": torch.randint(0, 4, (live,), dtype=torch.int32),
              "bonus_greedy": torch.randint(0, 1000, (live,)),
              "cap_trim_lens_greedy": torch.zeros(live, dtype=torch.int32)}
    site = "dspark_accept_greedy"
    rounds = {rt: decode_inputs(rt, live) for rt in (host, device)}
    for w in range(10):  # warm both: layouts at these live rows, gloo pairs
        for rt in (host, device):
            rt.converge(site, accept, round=w, live_rows=live)
            one_round(rt, rounds[rt], w, live)
    samples = {k: ([], []) for k in ("converge", "round")}
    for i in range(iters):
        for j, rt in enumerate((host, device)):
            samples["converge"][j].append(timed(lambda: rt.converge(site, accept, round=100 + i,
                                                                    live_rows=live)))
            samples["round"][j].append(timed(lambda: one_round(rt, rounds[rt], 100 + i, live)))
    return {k: (statistics.median(h), statistics.median(d)) for k, (h, d) in samples.items()}


def worker(rank: int, n: int, port: int, plan: dict, iters: int, live: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    torch.set_num_threads(1)
    from specplan.runtime import bind
    from specplan.runtime.runtime import Runtime

    host = bind(plan, rank=rank, world_size=n, hot_path="host")
    device = Runtime(host.plan, host.device, host.backend, None, "device")  # same world, own groups
    result = measure(host, device, live, iters)
    device.check_round()
    host.close()
    if rank in (0, 1):  # the source, and a receiver (the one that compares headers)
        out.put((rank, result))


def main() -> None:
    args, worlds = options(None, "worlds", "2,4,8", live_help="live rows per round (capacity 256)")
    print(f"gloo, DSpark tp N, live rows {args.live} of 256, median of {args.iters}, us")
    print(f"{'ranks':>8} {'converge host':>14} {'device us':>10} {'dev/host':>9} "
          f"{'round host us':>14} {'device us':>10} {'dev/host':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in worlds:
            plan = compile_plan(Path(tmp), "dspark", n)
            out = run_world(worker, n, plan, args)
            for rank, res in sorted(out.get() for _ in range(2)):
                (ch, cd), (rh, rd) = res["converge"], res["round"]
                who = f"{n} {'src' if rank == 0 else 'recv'}"
                print(f"{who:>8} {ch * 1e6:>14.0f} {cd * 1e6:>10.0f} {cd / ch:>9.2f} "
                      f"{rh * 1e6:>14.0f} {rd * 1e6:>10.0f} {rd / rh:>9.2f}")


if __name__ == "__main__":
    main()
