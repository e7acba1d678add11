"""vLLM 0.33.0 agrees its step gate over DP itself (engines/vllm/gates.py
`step_batch_descriptor`: clean), on the real sync_cudagraph_and_dp_padding over the real DP
group, gloo ranks, with and without the plugin: DP ranks whose own batches pick different
CUDA-graph sizes, or one of which wants eager, end with one descriptor and one padding
(tests/engines/vllm_gate_workers.py). The plugin, which keeps this agreement as the plan's
(plugins/vllm.py REACHED_GATES), starts on a plan that carries the gate."""

from __future__ import annotations

import json

import pytest
from test_vllm_plugin import run

from tests.helpers import compile_spec

pytestmark = pytest.mark.engines

SPEC = """
name: vllm-dp2-moe
engine: vllm
topology: {tp: 1, dp: 2, ep: 2, device: cpu}
model: {num_layers: 4, hidden_size: 64, vocab_size: 64, moe: {num_experts: 4, top_k: 2}}
speculative: {method: mtp, num_steps: 3, sampling: greedy}
runtime: {max_batch: 8, timeout_s: 60}
"""
ENGINE = json.dumps({"method": "mtp", "num_speculative_tokens": 3})


def _outs(results) -> list[dict]:
    for r in results:
        assert r.returncode == 0, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return [r.result for r in results]


@pytest.mark.parametrize("planned", [False, True])
def test_dp_ranks_agree_one_descriptor(tmp_path, planned):
    plan = compile_spec(tmp_path / "plan", SPEC) if planned else None
    if plan is not None:
        gates = {g["name"] for g in json.loads(plan.read_text())["gates"]}
        assert {"step_batch_descriptor", "dp_idle_dummy_batch"} <= gates
    outs = _outs(run(2, 1, 1, 2, plan=plan, worker="dp_step", module="vllm_gate_workers", spec=ENGINE))
    assert [o["own"] for o in outs] == [8, 16]  # each rank's own batch: another graph size
    assert [(o["mode"], o["tokens"], o["across"]) for o in outs] == [("FULL", 16, [16, 16])] * 2
    assert all(bool(o["hooks"]) is planned for o in outs)
    eager = _outs(run(2, 1, 1, 2, plan=plan, worker="dp_step", module="vllm_gate_workers",
                      spec=ENGINE, fault="eager:1"))
    assert [(o["mode"], o["eager"], o["across"]) for o in eager] == [("NONE", True, [3, 11])] * 2
