"""Flags that change the round are planned: check knows async scheduling."""

from __future__ import annotations

MODEL = "model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}"


def test_async_scheduling_is_a_planned_behaviour(cli, write_spec):
    on = write_spec(f"engine: vllm\nname: a\ntopology: {{tp: 2}}\n{MODEL}\n"
                    "speculative: {method: eagle3, num_steps: 3}\nruntime: {async_scheduling: true}\n")
    off = write_spec(f"engine: vllm\nname: a\ntopology: {{tp: 2}}\n{MODEL}\n"
                     "speculative: {method: eagle3, num_steps: 3}\n", "off.yaml")
    with_async = cli("check", str(on), "--format", "json").stdout
    without = cli("check", str(off), "--format", "json").stdout
    assert "consumed in round r + 1" in with_async
    assert "consumed in round r + 1" not in without


def test_host_decisions_under_async_scheduling_warn(cli, write_spec):
    spec = write_spec(f"engine: sglang\nname: a\nbehaviour: engine\ntopology: {{tp: 2}}\n{MODEL}\n"
                      "speculative: {method: ngram, num_steps: 3}\nruntime: {async_scheduling: true}\n")
    out = cli("check", str(spec), "--format", "json").stdout
    assert "under async scheduling sees round r - 1" in out


def test_eplb_is_a_planned_behaviour(cli, write_spec):
    spec = write_spec("engine: sglang\nname: a\ntopology: {tp: 4, ep: 4}\nmodel: {num_layers: 8, "
                      "hidden_size: 64, vocab_size: 1000, moe: {num_experts: 8, top_k: 2, "
                      "eplb: true}}\n")
    assert "EPLB: experts move between ranks" in cli("check", str(spec), "--format", "json").stdout
