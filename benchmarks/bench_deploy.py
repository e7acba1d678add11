"""Time of `specplan explain DEPLOYMENT --json` and `specplan check DEPLOYMENT` with 4,096 prefill
and 4,096 decode ranks (target: each under 5 s), beside one instance alone.

Each run is the real CLI in a fresh process (interpreter start included, as a user sees it),
on three generated deployments of the shape production uses: SGLang prefill TP16 x PP2 x DP128
(independent worlds) -> decode TP4096 with DP-attention 512 (MLA); vLLM prefill TP8 x PP2 x DP256
-> decode TP8 x DP512 (GQA 8 heads, nixl); and the single decode instance alone, for the ratio
of a deployment to one of its instances measured side by side. CPU seconds (user + system of the
child, from wait4) are reported beside wall time: on a shared machine wall time mostly measures
the neighbours.

    .venv/bin/python benchmarks/bench_deploy.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 5.0
MODEL = "{num_layers: 61, hidden_size: 7168, vocab_size: 129280, attention: %s, num_kv_heads: %d}"



def _pd(engine: str, attention: str, kv_heads: int, prefill: str, decode: str) -> str:
    """A prefill/decode deployment of the 61-layer model, EAGLE3 drafting."""
    return f"""name: bench-{engine}-pd
engine: {engine}
model: {MODEL % (attention, kv_heads)}
speculative: {{method: eagle3, num_steps: 3}}
instances:
  prefill: {{name: p, topology: {prefill}}}
  decode: {{name: d, topology: {decode}}}
"""


DEPLOYMENTS = {
    "sglang-4096-4096": _pd("sglang", "mla", 1, "{tp: 16, pp: 2, dp: 128}",
                            "{tp: 4096, dp: 512, dp_attention: true}"),
    "vllm-4096-4096": _pd("vllm", "gqa", 8, "{tp: 8, pp: 2, dp: 256}", "{tp: 8, dp: 512}"),
}
ALONE = f"""name: bench-decode-alone
engine: sglang
topology: {{tp: 4096, dp: 512, dp_attention: true}}
model: {MODEL % ("mla", 1)}
speculative: {{method: eagle3, num_steps: 3}}
"""


def run(args: list[str]) -> tuple[float, float]:
    """(wall seconds, child CPU seconds) of one CLI run."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "specplan.cli", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3):
        raise SystemExit(f"specplan {' '.join(args)} exited {code}: {proc.stderr.read().decode()}")
    return wall, usage.ru_utime + usage.ru_stime


def best(args: list[str], repeat: int) -> tuple[float, float]:
    runs = [run(args) for _ in range(repeat)]
    return min(w for w, _ in runs), min(c for _, c in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        alone = Path(tmp) / "alone.yaml"
        alone.write_text(ALONE)
        base = {cmd: best([cmd, str(alone), *extra], args.repeat)
                for cmd, extra in (("explain", ["--json"]), ("check", []))}
        print(f"{'deployment':<20} {'command':<14} {'wall s':>7} {'cpu s':>7} {'vs one instance':>16}")
        for cmd, (wall, cpu) in base.items():
            print(f"{'decode alone':<20} {cmd:<14} {wall:7.2f} {cpu:7.2f} {'1.00':>16}")
        for name, text in DEPLOYMENTS.items():
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            for cmd, extra in (("explain", ["--json"]), ("check", [])):
                wall, cpu = best([cmd, str(path), *extra], args.repeat)
                mark = "" if wall < TARGET_S else f"  (over {TARGET_S:.0f} s)"
                print(f"{name:<20} {cmd + ' ' + ' '.join(extra):<14} {wall:7.2f} {cpu:7.2f} "
                      f"{cpu / base[cmd][1]:16.2f}{mark}")


if __name__ == "__main__":
    main()
