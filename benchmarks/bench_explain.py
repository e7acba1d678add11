"""Time and peak memory of `specplan explain --json` from 8 to 65,536 ranks.

Each size runs the real CLI in a fresh process (interpreter start included, as a user sees
it) on two generated topologies, as large clusters are built (wide DP, a few PP stages): sglang
PP2 x TP(world/2) with DP-attention (attn_tp 8, ep = tp), and vllm DP x PP2 x TP8 with MoE
(one expert-parallel group per stage, the widest group family). Peak memory is the
child's max RSS from wait4; its CPU seconds (user + system, from wait4 too) are what the
fit uses, since wall time on a shared machine mostly measures the neighbours. The growth exponent is the slope of log(seconds) on log(ranks),
fitted over the sizes >= 1,024, and again over the time above the 8-rank start-up for the
sizes >= 16,384 (interpreter start and imports dominate small sizes).

    .venv/bin/python benchmarks/bench_explain.py [--max 65536] [--repeat 2]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = [8, 64, 512, 1024, 4096, 16384, 65536]
TARGET_S = 3.0


def sglang_spec(world: int) -> str:
    pp = 2 if world >= 16 else 1
    tp = world // pp
    return f"""name: bench-sglang-{world}
engine: sglang
topology: {{tp: {tp}, pp: {pp}, dp: {tp // 8}, dp_attention: true, ep: {tp}}}
model: {{num_layers: 61, hidden_size: 7168, vocab_size: 129280, moe: {{num_experts: 256, top_k: 8}}}}
speculative: {{method: eagle3, num_steps: 3}}
"""


def vllm_spec(world: int) -> str:
    tp, pp = 8, 2 if world >= 16 else 1
    dp = world // tp // pp
    return f"""name: bench-vllm-{world}
engine: vllm
topology: {{tp: {tp}, pp: {pp}, dp: {dp}, ep: {dp * tp}}}
model: {{num_layers: 80, hidden_size: 8192, vocab_size: 128256, moe: {{num_experts: 128, top_k: 8}}}}
speculative: {{method: eagle3, num_steps: 3}}
"""


def run_once(path: Path) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak MB, bytes of JSON) of one `specplan explain --json`."""
    cmd = [sys.executable, "-m", "specplan.cli", "explain", str(path), "--json"]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode()
        proc.stderr.close()
        if proc.returncode != 0:
            raise SystemExit(f"{path}: exit {proc.returncode}\n{err}")
        size = out.seek(0, 2)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, size


def fit_exponent(points: list[tuple[int, float]]) -> float:
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=SIZES[-1])
    ap.add_argument("--repeat", type=int, default=2, help="runs per point; the fastest is kept")
    args = ap.parse_args()
    sizes = [n for n in SIZES if n <= args.max]
    results: dict[str, list[tuple[int, float, float, float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, make in (("sglang", sglang_spec), ("vllm", vllm_spec)):
            rows = results.setdefault(label, [])
            for n in sizes:
                path = Path(tmp, f"{label}-{n}.yaml")
                path.write_text(make(n))
                runs = [run_once(path) for _ in range(args.repeat)]
                wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
                rows.append((n, wall, cpu, max(r[2] for r in runs), runs[0][3]))
    print(f"{'engine':<7} {'ranks':>7} {'wall s':>8} {'CPU s':>8} {'peak MB':>8} {'JSON MB':>8}")
    for label, rows in results.items():
        for n, wall, cpu, mb, size in rows:
            print(f"{label:<7} {n:>7} {wall:>8.3f} {cpu:>8.3f} {mb:>8.1f} {size / 2**20:>8.2f}")
    for label, rows in results.items():
        # CPU seconds: wall time on a shared machine mostly measures the neighbours
        rows = [(n, cpu, mb, size, wall) for n, wall, cpu, mb, size in rows]
        big = [(n, s) for n, s, _, _, _ in rows if n >= 1024] or [(n, s) for n, s, _, _, _ in rows]
        exp = fit_exponent(big) if len(big) > 1 else float("nan")
        # the work above the fixed start-up cost (imports), which dominates small sizes
        base = min(s for n, s, _, _, _ in rows if n <= 64)
        tail = [(n, max(s - base, 1e-3)) for n, s, _, _, _ in rows if n >= 16384]
        marginal = fit_exponent(tail) if len(tail) > 1 else float("nan")
        last_n, last_s = rows[-1][0], rows[-1][1]
        verdict = "ok" if rows[-1][4] < TARGET_S and exp <= 1.0 else "SLOW"
        print(f"{label}: growth exponent {exp:.2f} (ranks >= 1024), {marginal:.2f} above start-up "
              f"(ranks >= 16384); {last_n} ranks in {last_s:.2f} CPU s, {rows[-1][4]:.2f} wall s (target < {TARGET_S} s, "
              f"exponent <= 1) {verdict}")


if __name__ == "__main__":
    main()
