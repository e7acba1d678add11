"""Which gates each plugin reaches, and its refusal of a plan whose safety rests on one it
cannot (issue 34 item 5; docs/engines.md, Gates). Torch-free: the refusal runs at start,
before any collective, on every rank alike."""

from __future__ import annotations

import pytest

from specplan.engines.sglang.gates import GATES as SGLANG_GATES
from specplan.engines.vllm.gates import GATES as VLLM_GATES
from specplan.plugins import EngineRefused
from specplan.plugins.common import ActivePlan, read_plan_file, refuse_unreached_gates
from specplan.plugins.sglang import REACHED_GATES as SGLANG_REACHED
from specplan.plugins.vllm import REACHED_GATES as VLLM_REACHED
from tests.helpers import compile_spec

ADAPTIVE = """name: adaptive
engine: vllm
topology: {tp: 2, cp: 2}
model: {num_layers: 4, hidden_size: 64, vocab_size: 512}
speculative: {method: dspark, num_steps: 3, sampling: greedy, aux_layers: [1, 2, 3]}
engine_args:
  - --speculative-config '{"method":"dspark","num_speculative_tokens":3,"enable_adaptive_verification":true}'
"""
SHARDED = """name: sharded
engine: vllm
topology: {tp: 2, dp: 2, ep: 4}
model: {num_layers: 4, hidden_size: 64, vocab_size: 512, moe: {num_experts: 4, top_k: 2}}
speculative: {method: mtp, num_steps: 3, sampling: greedy}
engine_args: ["--enable-batch-sharded-sampling"]
"""


def _active(tmp_path, text: str) -> ActivePlan:
    path = compile_spec(tmp_path, text)
    return ActivePlan("vllm", str(path), read_plan_file(str(path), "vllm"))


def test_every_reached_gate_is_a_declared_one():
    assert SGLANG_REACHED <= {g.name for g in SGLANG_GATES}
    assert VLLM_REACHED <= {g.name for g in VLLM_GATES}
    assert {g.name for g in VLLM_GATES} - VLLM_REACHED == {"adaptive_verify_budget"}
    # DSpark's ragged verify budget: the _schedule_verify_lens hook passes through a rank with
    # no budget, so the plugin cannot agree it.
    assert {g.name for g in SGLANG_GATES} - SGLANG_REACHED == {"dspark_verify_budget"}


def test_vllm_refuses_a_plan_resting_on_the_adaptive_budget(tmp_path):
    active = _active(tmp_path, ADAPTIVE)
    with pytest.raises(EngineRefused, match=r"cannot reach: adaptive_verify_budget \(v1/worker/gpu/"
                                            r"spec_decode/adaptive_verification.py"):
        refuse_unreached_gates(active, VLLM_REACHED)


def test_vllm_accepts_the_gates_it_reaches(tmp_path):
    # Each rests on vLLM's own exchange over a group holding the plan's: the plan keeps it.
    active = _active(tmp_path, SHARDED)
    gates = {g.name: g for g in active.plan.gates}
    assert set(gates) == {"step_batch_descriptor", "dp_idle_dummy_batch", "skip_drafts",
                          "draft_batch_descriptor", "batch_shard_owner"}
    assert all(g.agreed_by.startswith("kept: ") for g in gates.values())
    refuse_unreached_gates(active, VLLM_REACHED)
