"""The verifier (`specplan check` minus YAML and printing) from 8 to 65,536 ranks.

Plans come from the same generated topologies as bench_compile.py (sglang TP x DP-attention
with MoE, dspark; vllm DP x PP2 x TP8 with MoE, eagle3 tree). Each size times verify(plan)
(best of --repeat, on a fresh plan dict each time so no cached groups carry over), then
measures its peak Python memory with tracemalloc in a separate run. The growth exponent is
the slope of log(seconds) on log(ranks) over sizes >= 512. Target: under 10 s at 65,536.

    .venv/bin/python benchmarks/bench_check.py [--max 65536] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_compile import SIZES, TARGET_S, sglang_spec, vllm_spec  # noqa: E402

from specplan import compile  # noqa: E402
from specplan.plan import load_plan  # noqa: E402
from specplan.schema import load_spec  # noqa: E402
from specplan.verify import verify  # noqa: E402


def compiled(text: str) -> dict:
    """plan.json's content: each measurement loads a fresh Plan (no lookups cached)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "spec.yaml"
        path.write_text(text)
        return compile(load_spec(path)).to_json()


def measure(plan: dict, repeat: int) -> tuple[float, float, int]:
    best = math.inf
    for _ in range(repeat):
        fresh = load_plan(plan)
        t0 = time.perf_counter()
        findings = verify(fresh)
        best = min(best, time.perf_counter() - t0)
    fresh = load_plan(plan)
    tracemalloc.start()
    verify(fresh)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return best, peak / 2**20, len(findings)


def exponent(rows: list[tuple[int, float]]) -> float:
    pts = [(math.log(n), math.log(max(s, 1e-6))) for n, s in rows if n >= 512]
    if len(pts) < 2:
        return float("nan")
    mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for label, make in (("sglang dspark dp-attn", sglang_spec), ("vllm eagle3 dp x pp2 x tp8", vllm_spec)):
        print(f"\n{label}\n| ranks | verify s | peak MiB | findings |\n|---:|---:|---:|---:|")
        rows = []
        for n in [s for s in SIZES if s <= args.max]:
            secs, mib, count = measure(compiled(make(n)), args.repeat)
            rows.append((n, secs))
            print(f"| {n} | {secs:.3f} | {mib:.1f} | {count} |", flush=True)
        worst = rows[-1][1]
        print(f"exponent (>= 512 ranks): {exponent(rows):.2f}; "
              f"{'meets' if worst < TARGET_S else 'MISSES'} the {TARGET_S:.0f} s target at {rows[-1][0]}")


if __name__ == "__main__":
    main()
