"""vLLM 0.33.0 agrees its step gate over DP itself (engines/vllm/gates.py
`step_batch_descriptor`: clean), on the real sync_cudagraph_and_dp_padding over the real DP
group, gloo ranks, with and without the plugin: DP ranks whose own batches pick different
CUDA-graph sizes, or one of which wants eager, end with one descriptor and one padding
(tests/engines/vllm_gate_workers.py). The plugin, which keeps this agreement as the plan's
(plugins/vllm.py REACHED_GATES), starts on a plan that carries the gate.

The plugin's own per-step guard (plugins/vllm_gates.py, issue 34 item 5) on vLLM's real
dispatch_cg_and_sync_dp and BatchSharder.shard_sampler_inputs: one rank's divergent input splits
the ranks without the plugin; with it they agree (the graph mode) or every rank ends in a
GateMismatch naming the gate, the plan's group and the ranks (exit 3, vllm_guard.py)."""

from __future__ import annotations

import json

import pytest
from test_vllm_plugin import fatal, run

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


# -- the plugin's own per-step guard (plugins/vllm_gates.py) -------------------------------------
# tp 2 x dp 2, a MoE model: vLLM agrees the step over each DP group ([0,2] and [1,3]) and trusts
# the one SchedulerOutput for TP ([0,1] and [2,3]); the plan agrees it over ep, all four ranks.
STAGE = """
name: vllm-tp2-dp2-moe
engine: vllm
topology: {tp: 2, dp: 2, ep: 4, device: cpu}
model: {num_layers: 4, hidden_size: 64, vocab_size: 64, moe: {num_experts: 4, top_k: 2}}
speculative: {method: mtp, num_steps: 3, sampling: greedy}
runtime: {max_batch: 8, timeout_s: 60}
"""
STEP_HOOK = "vllm.v1.worker.gpu.dp_utils.sync_cudagraph_and_dp_padding"
# 0.33.0, and 0.32.0 (the real-engine lane's release: its table's dp_sync has no allow_skip_drafts)
RELEASES = pytest.mark.parametrize("version", ["0.33.0", "0.32.0"])


def _stage(tmp_path, planned: bool, fault: str, version: str):
    plan = compile_spec(tmp_path / "plan", STAGE) if planned else None
    if plan is not None:
        gates = {g["name"]: g["family"] for g in json.loads(plan.read_text())["gates"]}
        assert gates["step_batch_descriptor"] == "ep"
    return run(4, 2, 1, 2, plan=plan, worker="stage_step", module="vllm_gate_workers", spec=ENGINE,
               fault=fault, version=version)


@RELEASES
def test_one_tp_rank_wanting_eager_splits_the_step_without_the_plugin(tmp_path, version):
    outs = sorted(_outs(_stage(tmp_path, False, "eager:1", version)), key=lambda o: o["rank"])
    # DP group [1,3] went eager with rank 1; [0,2] replayed a graph: TP peers 0 and 1 differ
    assert [(o["mode"], o["tokens"]) for o in outs] == [("FULL", 16), ("NONE", 3), ("FULL", 16), ("NONE", 11)]


@RELEASES
def test_the_plugin_agrees_the_graph_mode_over_the_plans_group(tmp_path, version):
    outs = sorted(_outs(_stage(tmp_path, True, "eager:1", version)), key=lambda o: o["rank"])
    assert all(STEP_HOOK in o["hooks"] for o in outs)
    assert [(o["mode"], o["tokens"], o["across"]) for o in outs] == [
        ("NONE", 3, [3, 11]), ("NONE", 3, [3, 11]), ("NONE", 11, [3, 11]), ("NONE", 11, [3, 11])]


@RELEASES
def test_one_tp_rank_with_another_batch_diverges_without_the_plugin(tmp_path, version):
    outs = sorted(_outs(_stage(tmp_path, False, "tokens:1", version)), key=lambda o: o["rank"])
    assert [o["tokens"] for o in outs] == [16, 32, 16, 32]  # ranks 0 and 1: one TP group, two shapes


@RELEASES
def test_the_plugin_names_a_tp_rank_with_another_batch(tmp_path, version):
    results = _stage(tmp_path, True, "tokens:1", version)
    for r in results:
        line = fatal(r, 3)
        assert "GateMismatch: gate step_batch_descriptor (decode, agreed over ep [0, 1, 2, 3])" in line
        assert "ranks [0, 1] run DP rank 0's step with different batches" in line
        assert "rank 0: num_tokens 3" in line and "rank 1: num_tokens 23" in line
        assert STEP_HOOK in line


SHARDED = """
name: vllm-tp2-sharded
engine: vllm
topology: {tp: 2, device: cpu}
model: {num_layers: 4, hidden_size: 64, vocab_size: 64}
speculative: {method: mtp, num_steps: 3, sampling: greedy}
runtime: {max_batch: 8, timeout_s: 60}
engine_args: ["--enable-batch-sharded-sampling"]
"""
SHARD_HOOK = "vllm.v1.worker.gpu.sample.batch_shard.BatchSharder.shard_sampler_inputs"


def _sharded(tmp_path, planned: bool, fault: str, version: str):
    plan = compile_spec(tmp_path / "plan", SHARDED) if planned else None
    return run(2, 2, 1, 1, plan=plan, worker="shard_owner", module="vllm_gate_workers", spec=ENGINE,
               fault=fault, version=version)


@RELEASES
def test_batch_shard_owner_rows_agree_and_diverge_on_the_real_sharder(tmp_path, version):
    same = sorted(_outs(_sharded(tmp_path, True, "", version)), key=lambda o: o["rank"])
    assert all(SHARD_HOOK in o["hooks"] for o in same)
    assert [(o["splits"], o["local"]) for o in same] == [([2, 2], 2)] * 2
    apart = sorted(_outs(_sharded(tmp_path, False, "slot:1", version)), key=lambda o: o["rank"])
    # rank 1 owns slots 0, 2, 4 on tp rank 0: the all_to_all's split sizes differ
    assert [o["splits"] for o in apart] == [[2, 2], [3, 1]]


@RELEASES
def test_the_plugin_names_a_tp_rank_with_other_owner_rows(tmp_path, version):
    for r in _sharded(tmp_path, True, "slot:1", version):
        line = fatal(r, 3)
        assert "GateMismatch: gate batch_shard_owner (decode, agreed over tp [0, 1])" in line
        assert "ranks hold different request slots" in line and SHARD_HOOK in line
