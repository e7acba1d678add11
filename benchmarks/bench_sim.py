"""The sim per method: rounds/s with and without speculation, tokens per target forward,
and the share of round time spent in converges, fused (one collective per boundary) against
unfused (one collective per decision), measured in one run.

Each method runs on the sim's sglang TP2 topology (2 processes, gloo on loopback, the tiny
float64 model), greedy, 4 requests; every run must pass the sim's verdict (token-identical to
plain greedy decoding) or the row says FAIL.

    .venv/bin/python benchmarks/bench_sim.py [--rounds 32] [--topology tp2]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from specplan.sim.launch import Options, simulate
from specplan.sim.matrix import METHODS, TOPOLOGIES, spec_text
from specplan.sim.report import summary, verdict


def measure(path: Path, rounds: int, **opts) -> dict:
    out = simulate(str(path), Options(rounds=rounds, requests=4, progress=False, **opts))
    s = summary(out)
    s["ok"] = verdict(out).ok
    return s


def row(method: str, topology: str, rounds: int, where: Path) -> list[str]:
    path = where / f"{method}.yaml"
    path.write_text(spec_text(topology, method))
    fused = measure(path, rounds)
    unfused = measure(path, rounds, unfused=True)
    plain = measure(path, rounds, spec=False)
    ok = fused["ok"] and unfused["ok"] and plain["ok"]
    ratio = fused["phases"]["converge"] / unfused["phases"]["converge"] \
        if unfused["phases"]["converge"] else float("nan")
    return [method, f"{plain['rounds_per_s']:.0f}", f"{fused['rounds_per_s']:.0f}",
            f"{fused['accept_len']:.2f}", f"{fused['converge_share']:.1%}",
            f"{unfused['converge_share']:.1%}", f"{ratio:.2f}", "ok" if ok else "FAIL"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=32)
    ap.add_argument("--topology", choices=list(TOPOLOGIES), default="tp2")
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    head = ["method", "rounds/s plain", "rounds/s spec", "tokens/target fwd",
            "converge share fused", "converge share unfused", "fused/unfused time", "verdict"]
    print(f"sim {args.topology}, {args.rounds} rounds, 4 requests, greedy")
    print(" | ".join(head))
    with tempfile.TemporaryDirectory() as tmp:
        for method in args.methods.split(","):
            print(" | ".join(row(method, args.topology, args.rounds, Path(tmp))), flush=True)


if __name__ == "__main__":
    main()
