"""What the benchmarks share: their options (--iters, --live, the sizes to run) and, for the
plugin benchmarks (bench_plugin_*.py), one launch of a plan's ranks on an engine's real code.

The plugin benchmarks' ranks are started by tests/ranks.py and report by its protocol through
the engine's test workers (tests/engines/<engine>_workers.py `main`, which installs the wheel's
harness first): a benchmark's rank function is registered there as the worker `bench`. Importing
this module puts tests/engines and the repository root on sys.path for them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINES = ROOT / "tests" / "engines"
sys.path[:0] = [str(ENGINES), str(ROOT)]


def options(argv: list[str] | None, sizes: str, default: str, iters: int = 200, live_help: str | None = None):
    """--iters, --live and the comma-separated sizes to run (`--<sizes>`, e.g. --worlds 2,4,8)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=iters)
    ap.add_argument("--live", type=int, default=64, help=live_help)
    ap.add_argument(f"--{sizes}", default=default)
    args = ap.parse_args(argv)
    return args, [int(n) for n in getattr(args, sizes).split(",")]


def start(argv: list[str] | None, workers, bench, engine: str, sizes: str, default: str,
          iters: int = 200):
    """A plugin benchmark's start. Launched as a rank (argv: ["bench", the wheel's root, the
    bench's arguments]), it runs `bench` through the engine's `workers` and exits; run by hand,
    it returns the options, the sizes and the engine's wheel root."""
    if argv and argv[0] == "bench":
        workers.WORKERS["bench"] = bench
        workers.main(argv)  # reports and ends the process
    args, values = options(argv, sizes, default, iters)
    from wheels import engine_root

    return args, values, str(engine_root(engine))


def sglang_spec(name: str, topology: str, method: str) -> str:
    """A plugin benchmark's tiny SGLang spec: a 3-step chain, every decision synced."""
    return f"""
name: {name}
engine: sglang
topology: {{{topology}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: 3, topk: 1, num_draft_tokens: 4, sampling: sampling}}
sync: {{policy: all}}
runtime: {{max_batch: 256, timeout_s: 120}}
"""


def sglang_server_args(method: str) -> dict:
    """The server arguments that launch `sglang_spec`'s method."""
    return dict(speculative_algorithm=method.upper(), speculative_num_steps=3,
                speculative_eagle_topk=1, speculative_num_draft_tokens=4)


def launch_bench(world: int, plan_dir: Path, spec: str, root: str, *args, module: str, env: dict,
                 timeout: float = 1200) -> list:
    """Compile `spec` into plan_dir and run `<module>`'s bench on `world` ranks with that plan."""
    from tests.helpers import compile_spec
    from tests.ranks import launch

    plan = compile_spec(plan_dir, spec)
    return launch(world, "bench", root, *args, module=module, path=(ENGINES, Path(__file__).parent),
                  env=dict(env, SPECPLAN_PLAN=str(plan)), timeout=timeout)


def first_rank(results: list, label: str) -> dict:
    """Rank 0's result; a failed rank 0 ends the benchmark with its error output."""
    r0 = results[0].result
    if r0 is None:
        raise SystemExit(f"{label}: rank 0 failed:\n{results[0].stderr[-3000:]}")
    return r0
