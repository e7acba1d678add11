"""Instance pairs for the handoff tables: built in memory, no YAML files needed."""

from __future__ import annotations

from specplan.deploy.load import InstancePair
from specplan.deploy.pairing import Instance
from specplan.schema import Spec


def spec(name: str, engine: str, topology: dict, attention: str = "gqa", kv_heads: int = 8,
         layers: int = 12, method: str = "eagle3") -> Spec:
    data = {"name": name, "engine": engine, "topology": topology,
            "model": {"num_layers": layers, "hidden_size": 64, "vocab_size": 128,
                      "attention": attention, "num_kv_heads": 1 if attention == "mla" else kv_heads},
            "speculative": {"method": method, "num_steps": 3} if method != "none" else {}}
    return Spec.model_validate(data)


def deployment(engine: str, prefill: dict, decode: dict, connector: str, **model) -> InstancePair:
    p = spec("p", engine, prefill, **model)
    d = spec("d", engine, decode, **model)
    return InstancePair("pd", "<pairs>", Instance("prefill", p), Instance("decode", d), connector)


# (prefill topology, decode topology, attention, num_kv_heads). Both engines: attention-TP
# ratios both ways, with KV replicated (more ranks than heads) and not.
TP_RATIOS = [
    ({"tp": 1}, {"tp": 1}, "gqa", 8),
    ({"tp": 2}, {"tp": 2}, "gqa", 8),
    ({"tp": 2}, {"tp": 4}, "gqa", 8),
    ({"tp": 4}, {"tp": 2}, "gqa", 8),
    ({"tp": 8}, {"tp": 1}, "gqa", 8),
    ({"tp": 1}, {"tp": 8}, "gqa", 8),
    ({"tp": 2}, {"tp": 8}, "gqa", 2),
    ({"tp": 8}, {"tp": 2}, "gqa", 2),
]

# SGLang: more ratios, MLA, PP on prefill (and on both), DP-attention, prefill CP.
SGLANG_PAIRS = TP_RATIOS + [
    ({"tp": 4}, {"tp": 8}, "gqa", 4),
    ({"tp": 2, "pp": 2}, {"tp": 1}, "gqa", 8),
    ({"tp": 2, "pp": 2}, {"tp": 4}, "gqa", 8),
    ({"tp": 4, "pp": 2}, {"tp": 2, "pp": 2}, "gqa", 8),
    ({"tp": 2, "pp": 4}, {"tp": 2}, "mha", 16),
    ({"tp": 2}, {"tp": 4, "dp": 2, "dp_attention": True}, "gqa", 8),
    ({"tp": 4, "dp": 2, "dp_attention": True}, {"tp": 2}, "gqa", 8),
    ({"tp": 8, "dp": 2, "dp_attention": True, "pp": 2}, {"tp": 8, "dp": 4, "dp_attention": True}, "gqa", 8),
    ({"tp": 2}, {"tp": 8}, "mla", 1),
    ({"tp": 8}, {"tp": 2}, "mla", 1),
    ({"tp": 4, "pp": 2}, {"tp": 16, "dp": 4, "dp_attention": True}, "mla", 1),
    ({"tp": 4, "cp": 2}, {"tp": 2}, "gqa", 8),
    ({"tp": 8, "cp": 2, "dp": 2, "dp_attention": True}, {"tp": 4}, "mla", 1),
    ({"tp": 4}, {"tp": 4, "dp": 2}, "gqa", 8),
    ({"tp": 16, "pp": 2}, {"tp": 16, "dp": 16, "dp_attention": True}, "mla", 1),
    ({"tp": 1, "pp": 2}, {"tp": 2, "pp": 2}, "gqa", 1),
]

# vLLM: decode PP 1 for nixl (the engine refuses more); mooncake also pairs PP sizes freely.
VLLM_PAIRS = TP_RATIOS + [
    ({"tp": 8}, {"tp": 4}, "gqa", 2),
    ({"tp": 4}, {"tp": 1}, "gqa", 1),
    ({"tp": 2, "pp": 2}, {"tp": 1}, "gqa", 8),
    ({"tp": 2, "pp": 2}, {"tp": 4}, "gqa", 8),
    ({"tp": 8, "pp": 2}, {"tp": 8}, "gqa", 8),
    ({"tp": 4, "pp": 4}, {"tp": 2}, "mha", 16),
    ({"tp": 2}, {"tp": 4, "dp": 2}, "gqa", 8),
    ({"tp": 4, "dp": 2}, {"tp": 2}, "gqa", 8),
    ({"tp": 2}, {"tp": 8}, "mla", 1),
    ({"tp": 8}, {"tp": 2}, "mla", 1),
    ({"tp": 4, "pp": 2}, {"tp": 16}, "mla", 1),
    ({"tp": 16, "pp": 2}, {"tp": 4, "dp": 4}, "mla", 1),
    ({"tp": 8, "pp": 2}, {"tp": 16}, "gqa", 8),
    ({"tp": 16}, {"tp": 8, "dp": 2}, "gqa", 4),
]

# The nixl connectors refuse a wider prefill TP whose ranks hold copies of the KV heads
# (NixlBaseConnectorWorker._validate_remote_agent_handshake); mooncake reads them.
def _replicated_pull(pair) -> bool:
    prefill, decode, attention, kv_heads = pair
    return attention != "mla" and prefill["tp"] > decode["tp"] and prefill["tp"] > kv_heads


NIXL_PAIRS = [pair for pair in VLLM_PAIRS if not _replicated_pull(pair)]
REPLICATED_PULL_PAIRS = [pair for pair in VLLM_PAIRS if _replicated_pull(pair)]

# Decode context parallel across the handoff. vLLM MLA: a DCP-sharded prefill (pcp 1) is read
# through TransferTopology.dcp_source_ranks over its TP ranks. SGLang: equal DCP sizes pair
# rank for rank; an unsharded MLA prefill relays out to a DCP-sharded decode.
VLLM_DCP_PAIRS = [
    ({"tp": 4, "dcp": 4}, {"tp": 4}, "mla", 1),
    ({"tp": 4, "dcp": 2}, {"tp": 2}, "mla", 1),
    ({"tp": 2, "dcp": 2}, {"tp": 4, "dcp": 4}, "mla", 1),
    ({"tp": 4, "dcp": 4}, {"tp": 4, "dcp": 2}, "mla", 1),
]
SGLANG_DCP_PAIRS = [
    ({"tp": 2}, {"tp": 4, "dcp": 2}, "mla", 1),
    ({"tp": 4, "dcp": 2}, {"tp": 4, "dcp": 2}, "mla", 1),
    ({"tp": 2}, {"tp": 2, "dcp": 2}, "gqa", 8),
    ({"tp": 2, "dcp": 2}, {"tp": 2}, "mla", 1),
]

MOONCAKE_PP_PAIRS = [
    ({"tp": 2, "pp": 2}, {"tp": 2, "pp": 2}, "gqa", 8),
    ({"tp": 2}, {"tp": 2, "pp": 2}, "gqa", 8),
    ({"tp": 4, "pp": 2}, {"tp": 2, "pp": 4}, "gqa", 8),
    ({"tp": 2, "pp": 3}, {"tp": 4, "pp": 2}, "gqa", 8),
]

# vLLM prefill context parallel (cp = pcp; dcp shards it): replicated PCP (dcp 1, PCP rank 0
# serves), PCP sharded by dcp = pcp at prefill TP 1 (the PCP ranks are the transfer ranks),
# and the pairings refused: dcp not spanning PCP, replicated PCP against a DCP-sharded decode,
# sharded PCP at prefill TP > 1 (specplan's own: the engine maps TP 1 only).
VLLM_PCP_PAIRS = [
    ({"tp": 2, "cp": 2}, {"tp": 2}, "mla", 1),
    ({"tp": 2, "cp": 2}, {"tp": 4}, "gqa", 8),
    ({"tp": 4, "cp": 2}, {"tp": 2}, "gqa", 8),
    ({"tp": 1, "cp": 2, "dcp": 2}, {"tp": 2}, "mla", 1),
    ({"tp": 1, "cp": 4, "dcp": 4}, {"tp": 1}, "mla", 1),
    ({"tp": 1, "cp": 4, "dcp": 4}, {"tp": 2, "dcp": 2}, "mla", 1),
    ({"tp": 1, "cp": 2, "dcp": 2}, {"tp": 4, "dcp": 4}, "mla", 1),
    ({"tp": 1, "cp": 4, "dcp": 4}, {"tp": 4, "dcp": 2}, "mla", 1),
    ({"tp": 2, "cp": 2, "dcp": 4}, {"tp": 2}, "mla", 1),
    ({"tp": 1, "cp": 2}, {"tp": 2, "dcp": 2}, "mla", 1),
    ({"tp": 2, "cp": 2, "dcp": 2}, {"tp": 2}, "mla", 1),
]
