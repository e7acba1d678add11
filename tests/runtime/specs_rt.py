"""Small cpu specs the runtime tests compile on the fly (backend gloo)."""

import pytest


def _spec(name: str, engine: str, topology: str, speculative: str, *sections: str,
          moe: str = "", runtime: str = "") -> str:
    """A spec's YAML: 8 layers of a 64-wide model (MoE `moe`), 8 rows, a 20 s timeout."""
    model = "{num_layers: 8, hidden_size: 64, vocab_size: 1000" + (f", moe: {moe}" if moe else "") + "}"
    lines = [f"name: {name}", f"engine: {engine}", f"topology: {topology}", f"model: {model}",
             f"speculative: {speculative}", *sections, f"runtime: {{max_batch: 8, timeout_s: 20{runtime}}}"]
    return "\n" + "\n".join(lines) + "\n"


TP2_DSPARK = _spec("rt-tp2-dspark", "sglang", "{tp: 2, device: cpu}", "{method: dspark, num_steps: 3}",
                   "sync: {policy: all}")

TP4_DPATTN_EAGLE = _spec("rt-tp4-dpattn-eagle", "sglang",
                         "{tp: 4, dp: 2, dp_attention: true, ep: 4, device: cpu}",
                         "{method: eagle, num_steps: 3, topk: 1, sampling: sampling}",
                         moe="{num_experts: 8, top_k: 2}")

PP2_EAGLE3 = _spec("rt-pp2-eagle3", "vllm", "{tp: 1, pp: 2, device: cpu}", "{method: eagle3, num_steps: 3}")

# The 8-rank cases of the multi-process tests (tp 4 x pp 2, ring relays) repeat what their 2- and
# 4-rank cases show (converges, pp relays, groups): they run in the slow step (.ci/run's second).
EIGHT_RANKS = pytest.mark.slow
TP4_PP2_DSPARK_RING = _spec("rt-tp4-pp2-dspark", "sglang", "{tp: 4, pp: 2, device: cpu}",
                            "{method: dspark, num_steps: 3}", "sync: {policy: all}", "pipeline: {relay: ring}")

TP2_OFF = _spec("rt-tp2-off", "sglang", "{tp: 2, device: cpu}", "{method: dspark, num_steps: 3}",
                "sync: {policy: off}", runtime=", probe_every: 1")
