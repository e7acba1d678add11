"""Topologies each engine accepts or refuses (SGLang 0.5.23, vLLM 0.33.0), with the spec key
specplan's refusal points at. Every example of issue 13 is here; the `engines` tests run the
engines' own validation functions on the same table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    engine: str
    topology: dict
    refused_at: str | None = None  # dotted spec key of specplan's refusal; None = accepted
    experts: int | None = None  # a MoE model with this many experts
    note: str = ""

    def spec(self) -> dict:
        model = {"num_layers": 64, "hidden_size": 4096, "vocab_size": 32000}
        if self.experts is not None:
            model["moe"] = {"num_experts": self.experts, "top_k": 2}
        return {"name": "table", "engine": self.engine, "topology": dict(self.topology),
                "model": model, "speculative": {"method": "eagle", "num_steps": 3}}


SGLANG = [
    Case("issue-tp10-pp4-dpattn10-dcp5", "sglang",
         {"tp": 10, "pp": 4, "dp": 10, "dp_attention": True, "dcp": 5},
         note="dcp chunks the TP group; it need not divide attn_tp (1)"),
    Case("issue-tp16-dpattn4-cp2-dcp8", "sglang", {"tp": 16, "dp": 4, "dp_attention": True, "cp": 2, "dcp": 8}),
    Case("dcp-not-dividing-tp", "sglang", {"tp": 8, "dcp": 3}, "topology.dcp"),
    Case("dcp-equals-tp", "sglang", {"tp": 8, "dp": 2, "dp_attention": True, "dcp": 8}),
    Case("dpattn-not-dividing-tp", "sglang", {"tp": 8, "dp": 3, "dp_attention": True}, "topology.dp"),
    Case("cp-not-dividing-tp", "sglang", {"tp": 8, "cp": 3}, "topology.cp"),
    Case("dpattn-times-cp-not-dividing-tp", "sglang", {"tp": 8, "dp": 4, "dp_attention": True, "cp": 4},
         "topology.cp"),
    Case("moe-dp-as-wide-as-cp", "sglang", {"tp": 8, "cp": 2, "moe_dp": 2, "ep": 4}, experts=64),
    Case("moe-dp-without-ep", "sglang", {"tp": 8, "cp": 2, "moe_dp": 2}, experts=64),
    Case("moe-dp-with-pp", "sglang", {"tp": 8, "cp": 2, "moe_dp": 2, "pp": 2}, "topology.moe_dp", experts=64),
    Case("moe-dp-unlike-cp", "sglang", {"tp": 8, "cp": 4, "moe_dp": 2}, "topology.moe_dp", experts=64),
    Case("moe-dp-without-cp", "sglang", {"tp": 8, "moe_dp": 2}, "topology.moe_dp", experts=64),
    Case("moe-dp-times-ep-below-tp", "sglang", {"tp": 8, "cp": 2, "moe_dp": 2, "ep": 2}, "topology.moe_dp",
         experts=64),
    Case("cp-wider-than-moe-dp", "sglang", {"tp": 8, "cp": 4, "ep": 2, "pp": 2}, experts=64),
    Case("ep-not-dividing-tp", "sglang", {"tp": 8, "ep": 3}, "topology.ep", experts=96),
    Case("experts-not-dividing-ep", "sglang", {"tp": 8, "ep": 8}, "model.moe.num_experts", experts=60),
    Case("experts-dividing-ep", "sglang", {"tp": 8, "ep": 8}, experts=64),
    Case("ep-without-moe", "sglang", {"tp": 8, "ep": 8}, "topology.ep"),
    Case("sixteen-gpus-on-one-node", "sglang", {"tp": 16, "nodes": 1}, "topology.nodes"),
    Case("sixteen-gpus-on-two-nodes", "sglang", {"tp": 16, "nodes": 2}),
    Case("sixteen-npus-on-one-node", "sglang", {"tp": 16, "nodes": 1, "device": "npu"}),
    Case("nodes-unwritten", "sglang", {"tp": 16}, note="no node size to check against"),
    Case("nodes-not-dividing-ranks", "sglang", {"tp": 4, "pp": 3, "nodes": 8}, "topology.nodes"),
    Case("dp-replicas-on-two-nodes", "sglang", {"tp": 4, "dp": 2, "nodes": 2}, "topology.nodes"),
    Case("dp-replicas-on-one-node", "sglang", {"tp": 4, "dp": 2}, note="WARN: 8 GPUs on one node"),
]

VLLM = [
    Case("issue-tp2-pcp4-dcp4", "vllm", {"tp": 2, "cp": 4, "dcp": 4}),
    Case("issue-tp2-dp3-pcp4-dcp4", "vllm", {"tp": 2, "dp": 3, "cp": 4, "dcp": 4}),
    Case("issue-tp2-dp2-pcp2-dcp4-ep", "vllm", {"tp": 2, "dp": 2, "cp": 2, "dcp": 4, "ep": 8}, experts=64),
    Case("issue-tp4-pcp2-dcp8", "vllm", {"tp": 4, "cp": 2, "dcp": 8}),
    Case("issue-tp4-pp2-pcp2-dcp4", "vllm", {"tp": 4, "pp": 2, "cp": 2, "dcp": 4}, "topology.dcp"),
    Case("issue-tp8-pcp2-dcp4", "vllm", {"tp": 8, "cp": 2, "dcp": 4}, "topology.dcp"),
    Case("pcp-dcp-off", "vllm", {"tp": 4, "cp": 2}),
    Case("dcp-dividing-tp", "vllm", {"tp": 8, "dcp": 4}),
    Case("dcp-not-dividing-tp", "vllm", {"tp": 8, "dcp": 3}, "topology.dcp"),
    Case("partial-ep", "vllm", {"tp": 8, "ep": 4}, "topology.ep", experts=64),
    Case("experts-uneven-over-ep", "vllm", {"tp": 4, "dp": 2, "ep": 8}, experts=60,
         note="vLLM's expert map spreads the remainder over the first ranks"),
    Case("sixteen-gpus-on-one-node", "vllm", {"tp": 8, "dp": 2, "nodes": 1}, "topology.nodes"),
    Case("sixteen-gpus-on-two-nodes", "vllm", {"tp": 8, "dp": 2, "nodes": 2}),
    Case("dp-attention-is-sglang", "vllm", {"tp": 4, "dp": 2, "dp_attention": True}, "topology.dp_attention"),
]

CASES = SGLANG + VLLM
