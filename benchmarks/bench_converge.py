"""Fused guarded converges against the engines' separate broadcasts, on gloo, 2/4/8 ranks.

    .venv/bin/python benchmarks/bench_converge.py [--iters 200] [--live 64]

Per world size, one run measures side by side (alternating every iteration):
- DSpark accept: SGLang's three broadcasts (correct_len, bonus, cap_trim_lens: three plain
  `dist.broadcast` calls into preallocated tensors, nothing else) vs one fused boundary
  (`rt.converge("dspark_accept_greedy")`: guard header, pack, one broadcast of the family's
  whole buffer, header check, one private copy of the fields);
- EAGLE accept: three broadcasts (predict, accept_index, num_correct_drafts) vs one packed;
- the agreement probe per round (hash of every decision + one all-gather over the replica).
Reported: median microseconds per round on the source rank and the ratio separate / fused.
"""

from __future__ import annotations

import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from shared import options

SPEC = """
name: bench-{method}-tp{n}
engine: sglang
topology: {{tp: {n}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: 3}}
sync: {{policy: all}}
runtime: {{max_batch: 256, timeout_s: 60}}
"""


def compile_plan(tmp: Path, method: str, n: int):
    from specplan import compile
    from specplan.schema import load_spec

    src = tmp / f"{method}{n}.yaml"
    src.write_text(SPEC.format(method=method, n=n))
    return compile(load_spec(str(src)))


def separate(tensors: list[torch.Tensor]) -> None:
    for t in tensors:
        dist.broadcast(t, src=0)


def timed(fn) -> float:
    dist.barrier()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pair(rt, site: str, values: dict, iters: int, live: int) -> tuple[float, float]:
    fused_t, sep_t = [], []
    order = [v.clone() for v in values.values()]  # the engine's own preallocated tensors
    for _ in range(10):  # warm both paths (layouts at these live rows, gloo pairs)
        separate(order)
        rt.converge(site, values, round=-1, live_rows=live)
    for i in range(iters):
        sep_t.append(timed(lambda: separate(order)))
        fused_t.append(timed(lambda: rt.converge(site, values, round=i, live_rows=live)))
    return statistics.median(sep_t), statistics.median(fused_t)


def worker(rank: int, n: int, port: int, plans: dict, iters: int, live: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(n))
    from specplan.runtime import bind

    torch.manual_seed(0)  # the same values on every rank: the probe must find agreement
    rt = bind(plans["dspark"], rank=rank, world_size=n)
    accept = {"correct_len_greedy": torch.randint(0, 4, (live,), dtype=torch.int32),
              "bonus_greedy": torch.randint(0, 1000, (live,)),
              "cap_trim_lens_greedy": torch.zeros(live, dtype=torch.int32)}
    ds = pair(rt, "dspark_accept_greedy", accept, iters, live)
    held = {"draft_tokens": torch.randint(0, 1000, (live, 3)), **accept,
            "verify_lens": torch.full((live,), 4, dtype=torch.int32)}
    probe = statistics.median(timed(lambda: rt.probe(i, held)) for i in range(iters // 2))
    rt.close()
    os.environ["MASTER_PORT"] = str(port + 1)  # a fresh store for the second world
    rt = bind(plans["eagle"], rank=rank, world_size=n)
    eagle = {"predict": torch.randint(0, 1000, (live * 4,), dtype=torch.int32),
             "accept_index": torch.randint(0, live * 4, (live, 4), dtype=torch.int32),
             "num_correct_drafts": torch.randint(0, 4, (live,), dtype=torch.int32)}
    ea = pair(rt, "eagle_accept", eagle, iters, live)
    rt.close()
    if rank == 0:
        out.put((n, ds, ea, probe))


def free_port() -> int:
    """A port p with p + 1 also free (one store per bound world)."""
    while True:
        with socket.socket() as s, socket.socket() as t:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            try:
                t.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


def run_world(worker, n: int, plans, args):
    """`worker(rank, n, port, plans, iters, live, queue)` on n spawned ranks; the queue the
    ranks put their timings in."""
    out = mp.get_context("spawn").Queue()
    mp.start_processes(worker, args=(n, free_port(), plans, args.iters, args.live, out),
                       nprocs=n, start_method="spawn", join=True)
    return out


def main() -> None:
    args, worlds = options(None, "worlds", "2,4,8", live_help="live rows per round (capacity 256)")
    torch.set_num_threads(1)
    print(f"gloo, live rows {args.live} of 256, median of {args.iters} rounds, guard header included")
    print(f"{'ranks':>5} {'dspark 3x bcast us':>19} {'fused us':>9} {'ratio':>6} "
          f"{'eagle 3x bcast us':>18} {'packed us':>10} {'ratio':>6} {'probe us':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in worlds:
            plans = {m: compile_plan(Path(tmp), m, n) for m in ("dspark", "eagle")}
            out = run_world(worker, n, plans, args)
            _, (ds_sep, ds_fused), (ea_sep, ea_fused), probe = out.get()
            print(f"{n:>5} {ds_sep * 1e6:>19.0f} {ds_fused * 1e6:>9.0f} {ds_sep / ds_fused:>6.2f} "
                  f"{ea_sep * 1e6:>18.0f} {ea_fused * 1e6:>10.0f} {ea_sep / ea_fused:>6.2f} {probe * 1e6:>9.0f}")


if __name__ == "__main__":
    main()
