"""Write the golden-plan spec matrix: every method x {greedy, sampling} x four topologies.

Run once (`python tests/golden/plans/make_specs.py`); the YAML files it writes are committed
and are the test inputs. Regenerate the plans with
`SPECPLAN_UPDATE_GOLDEN=1 pytest tests/golden/plans`.

Topologies: plain TP (sglang tp 2); DP-attention with a MoE model (sglang tp 4, dp 2,
attn_tp 2, deepep all-to-all); PP 2 (vllm pp 2 x tp 2); PP 3 with a middle stage
(vllm pp 3, tp 1, 9 layers).
"""

from __future__ import annotations

from pathlib import Path

import yaml

HERE = Path(__file__).parent

METHODS = {
    "none": {"method": "none"},
    "eagle-chain": {"method": "eagle", "num_steps": 3},
    "eagle-tree": {"method": "eagle", "num_steps": 3, "topk": 2, "num_draft_tokens": 6},
    "eagle3": {"method": "eagle3", "num_steps": 3},
    "mtp": {"method": "mtp", "num_steps": 2},
    "standalone": {"method": "standalone", "num_steps": 4},
    "ngram": {"method": "ngram", "num_steps": 4},
    "dflash": {"method": "dflash", "num_steps": 7},
    "dspark": {"method": "dspark", "num_steps": 5},
}

TOPOLOGIES = {
    "tp2": ("sglang", {"tp": 2}, {"num_layers": 8}),
    "dpattn": ("sglang", {"tp": 4, "dp": 2, "dp_attention": True, "ep": 4},
               {"num_layers": 8, "moe": {"num_experts": 8, "top_k": 2, "a2a": "deepep"}}),
    "pp2": ("vllm", {"tp": 2, "pp": 2}, {"num_layers": 8}),
    "pp3": ("vllm", {"tp": 1, "pp": 3}, {"num_layers": 9}),
}


def spec(method: str, sampling: str, topo: str) -> dict:
    engine, topology, model = TOPOLOGIES[topo]
    speculative = dict(METHODS[method])
    if method != "none" or sampling != "greedy":
        speculative["sampling"] = sampling
    return {
        "name": f"{method}-{sampling}-{topo}",
        "engine": engine,
        "topology": dict(topology),
        "model": {**model, "hidden_size": 256, "vocab_size": 1024},
        "speculative": speculative,
        "runtime": {"max_batch": 8},
    }


def main() -> None:
    for method in METHODS:
        for sampling in ("greedy", "sampling"):
            for topo in TOPOLOGIES:
                data = spec(method, sampling, topo)
                text = f"# Golden plan input: {method}, {sampling}, {topo} (make_specs.py).\n"
                text += yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
                (HERE / f"{data['name']}.yaml").write_text(text)


if __name__ == "__main__":
    main()
