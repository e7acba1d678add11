"""Compile time and plan.json size from 8 to 65,536 ranks.

Each size runs `specplan compile` in-process (load, passes, build_plan, write) on two
generated topologies: sglang TP8 x DP-attention with growing dp (one TP block of
dp * 8 ranks, dp replicas) and vllm DP x PP2 x TP8 with MoE (expert parallel across the whole
stage). The growth exponent is the slope of log(seconds) on log(ranks) over sizes >= 512.
Target: under 10 s at 65,536 ranks, growth no worse than linear, plan size flat in ranks
(families are stored as rules, rank classes are per stage).

    .venv/bin/python benchmarks/bench_compile.py [--max 65536] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from specplan.lower import write_plan
from specplan import compile
from specplan.schema import load_spec

SIZES = [8, 64, 512, 1024, 4096, 16384, 65536]
TARGET_S = 10.0


def sglang_spec(world: int) -> str:
    return f"""name: bench-sglang-{world}
engine: sglang
topology: {{tp: {world}, dp: {max(world // 8, 1)}, dp_attention: true, ep: {world}}}
model: {{num_layers: 61, hidden_size: 7168, vocab_size: 129280,
        moe: {{num_experts: {max(world, 256)}, top_k: 8, a2a: deepep}}}}
speculative: {{method: dspark, num_steps: 7, sampling: mixed}}
sync: {{policy: all}}
"""


def vllm_spec(world: int) -> str:
    dp = max(world // 16, 1)
    pp = 2 if world >= 16 else 1
    return f"""name: bench-vllm-{world}
engine: vllm
topology: {{tp: 8, pp: {pp}, dp: {dp}, ep: {dp * 8}}}
model: {{num_layers: 61, hidden_size: 7168, vocab_size: 129280, moe: {{num_experts: 256, top_k: 8}}}}
speculative: {{method: eagle3, num_steps: 3, topk: 2, num_draft_tokens: 6, sampling: sampling}}
sync: {{policy: all}}
"""


def measure(text: str, repeat: int) -> tuple[float, int, int]:
    best = math.inf
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        path.write_text(text)
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = write_plan(compile(load_spec(path)), Path(d) / "out")
            best = min(best, time.perf_counter() - t0)
        world = load_spec(path)
        return best, out.stat().st_size, world.topology.tp * world.topology.pp * (
            world.topology.dp if world.engine == "vllm" else 1)


def slope(points: list[tuple[int, float]]) -> float:
    pts = [(math.log(n), math.log(max(t, 1e-6))) for n, t in points if n >= 512]
    if len(pts) < 2:
        return float("nan")
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sizes = [n for n in SIZES if n <= args.max]
    print(f"{'topology':<8} {'ranks':>7} {'compile s':>10} {'plan.json B':>12}")
    for name, make in (("sglang", sglang_spec), ("vllm", vllm_spec)):
        points = []
        for n in sizes:
            secs, size, world = measure(make(n), args.repeat)
            assert world == n, (name, n, world)
            points.append((n, secs))
            print(f"{name:<8} {n:>7} {secs:>10.3f} {size:>12}")
        worst = max(t for _, t in points)
        print(f"{name}: growth exponent {slope(points):.2f} (>= 512 ranks); "
              f"max {worst:.3f} s ({'OK' if worst < TARGET_S else 'OVER'} target {TARGET_S:.0f} s)")


if __name__ == "__main__":
    main()
