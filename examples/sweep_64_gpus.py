"""Sweep the layouts of 64 GPUs for a MoE model with MTP and print those `check` proves clean.

Every tp x dp x pp x ep that SGLang can launch on 64 GPUs (DP-attention when dp > 1) is planned
and checked through the Python API; the clean ones are printed with their collectives and bytes
per rank per decode round (at runtime.max_batch), fewest bytes first.

    python examples/sweep_64_gpus.py
"""

from __future__ import annotations

import specplan
from specplan.errors import UserError

GPUS = 64
MODEL = {"num_layers": 61, "hidden_size": 7168, "vocab_size": 129280,
         "moe": {"num_experts": 256, "top_k": 8}}


def layouts():
    for pp in (1, 2, 4, 8):
        tp = GPUS // pp
        for dp in (d for d in (1, 2, 4, 8, 16, 32, 64) if tp % d == 0):
            for ep in sorted({1, tp}):
                yield {"tp": tp, "pp": pp, "dp": dp, "dp_attention": dp > 1, "ep": ep, "nodes": 8}


def spec(topology: dict) -> dict:
    name = "tp{tp}-pp{pp}-dp{dp}-ep{ep}".format(**topology)
    return {"name": name, "engine": "sglang", "topology": topology, "model": MODEL,
            "speculative": {"method": "mtp", "num_steps": 3, "sampling": "sampling"},
            "runtime": {"max_batch": 128}}


def main() -> None:
    rows, refused = [], 0
    for topology in layouts():
        try:
            deployment = specplan.load(spec(topology))
            findings = deployment.check()
        except UserError:
            refused += 1  # a layout the schema or the engine's rules refuse
            continue
        if any(f.severity == "ERROR" for f in findings):
            continue
        decode = [c["rounds"]["decode"] for c in deployment.explain()["round"]["per_rank_class"]]
        worst = max(decode, key=lambda r: (r["bytes"], r["collectives"]))
        rows.append((worst["bytes"], worst["collectives"], deployment.name, len(findings)))
    print(f"{len(rows)} layouts of {GPUS} GPUs proven clean ({refused} refused by the rules)")
    print(f"{'layout':<22} {'collectives':>11} {'bytes/round':>11} {'warnings':>8}")
    for nbytes, collectives, name, warnings in sorted(rows):
        print(f"{name:<22} {collectives:>11} {nbytes:>11} {warnings:>8}")


if __name__ == "__main__":
    main()
