"""Small cpu specs the runtime tests compile on the fly (backend gloo)."""

TP2_DSPARK = """
name: rt-tp2-dspark
engine: sglang
topology: {tp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: dspark, num_steps: 3}
sync: {policy: all}
runtime: {max_batch: 8, timeout_s: 20}
"""

TP4_DPATTN_EAGLE = """
name: rt-tp4-dpattn-eagle
engine: sglang
topology: {tp: 4, dp: 2, dp_attention: true, ep: 4, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000, moe: {num_experts: 8, top_k: 2}}
speculative: {method: eagle, num_steps: 3, topk: 1, sampling: sampling}
runtime: {max_batch: 8, timeout_s: 20}
"""

PP2_EAGLE3 = """
name: rt-pp2-eagle3
engine: vllm
topology: {tp: 1, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: eagle3, num_steps: 3}
runtime: {max_batch: 8, timeout_s: 20}
"""

TP4_PP2_DSPARK_RING = """
name: rt-tp4-pp2-dspark
engine: sglang
topology: {tp: 4, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: dspark, num_steps: 3}
sync: {policy: all}
pipeline: {relay: ring}
runtime: {max_batch: 8, timeout_s: 20}
"""

TP2_OFF = """
name: rt-tp2-off
engine: sglang
topology: {tp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
speculative: {method: dspark, num_steps: 3}
sync: {policy: off}
runtime: {max_batch: 8, timeout_s: 20, probe_every: 1}
"""
