"""The sim's correctness matrix: topologies x methods, as spec YAML text.

Used by tests/sim and benchmarks/bench_sim.py; `spec_text` writes a small sglang spec whose
sim must be token-identical to plain greedy decoding.
"""

from __future__ import annotations

TOPOLOGIES = {
    "tp2": "{tp: 2}",
    "pp2": "{tp: 1, pp: 2}",
    "pp3": "{tp: 1, pp: 3}",
    "tp2pp2": "{tp: 2, pp: 2}",
    "tp4-dpattn2": "{tp: 4, dp: 2, dp_attention: true}",
    "tp2-dpattn2": "{tp: 2, dp: 2, dp_attention: true}",
}

METHODS = {
    "eagle-chain": "{method: eagle, num_steps: 3}",
    "eagle-tree": "{method: eagle, num_steps: 3, topk: 2, num_draft_tokens: 6}",
    "eagle3": "{method: eagle3, num_steps: 3}",
    "mtp": "{method: mtp, num_steps: 3}",
    "ngram": "{method: ngram, num_steps: 3}",
    "dflash": "{method: dflash, num_steps: 3}",
    "dspark": "{method: dspark, num_steps: 3}",
}


def spec_text(topology: str, method: str, *, sampling: str = "greedy", policy: str = "safe",
              layers: int = 6, moe: bool = False, extra: str = "") -> str:
    name = f"sim-{topology}-{method}".replace("_", "-")
    spec = METHODS[method][:-1] + (f", sampling: {sampling}}}" if sampling != "greedy" else "}")
    moe_text = ", moe: {num_experts: 8, top_k: 2}" if moe else ""
    topo = TOPOLOGIES[topology]
    if moe and "dp_attention" in topo:
        topo = topo[:-1] + f", ep: {topo.split('tp: ')[1].split(',')[0]}}}"
    return (f"name: {name}\nengine: sglang\ntopology: {topo}\n"
            f"model: {{num_layers: {layers}, hidden_size: 64, vocab_size: 512{moe_text}}}\n"
            f"speculative: {spec}\nsync: {{policy: {policy}}}\n{extra}")
