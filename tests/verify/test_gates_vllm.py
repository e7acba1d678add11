"""vLLM 0.33.0's gates through the CLI (engines/vllm/gates.py cites each function): which gates
a spec takes, the group vLLM agrees each over, check's verdict, and specplan's own plan.

Verdicts read from the code: every per-step gate is agreed by the replica's one
SchedulerOutput (and, with DP over a MoE model, the 7 x dp DP-sync all-reduce) over every
group it selects, so it is clean; DSpark's adaptive verify budget is agreed by no group (rank
0's cost curves are broadcast over TP, the confidences it ranks are each rank's own), so with
tp > 1 or prefill context parallel it is an ERROR (vllm#54011; tests/ecosystem/gates g05).
"""

from __future__ import annotations

import json

from test_gates import _spec as gate_spec

MODEL = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
MOE = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}\n"
ADAPTIVE = ("engine_args:\n  - --speculative-config '{\"method\":\"dspark\",\"num_speculative_tokens\":3,"
            "\"enable_adaptive_verification\":true}'\n")


def _spec(tmp_path, name, *, topology, model=MODEL, method="mtp", behaviour="engine", extra=""):
    return gate_spec(tmp_path, name, topology=topology, model=model, method=method,
                     behaviour=behaviour, extra=extra, engine="vllm")


def _gates(cli, spec) -> dict[str, dict]:
    return {g["gate"]: g for g in json.loads(cli("explain", spec, "--json").stdout)["round"]["gates"]}


def _gate_findings(cli, spec) -> list[dict]:
    run = cli("check", spec, "--json", code=(0, 3))
    return [f for f in json.loads(run.stdout)["findings"] if "gate" in f]


def test_lockstep_dp_gates_are_agreed_over_the_stage(cli, tmp_path):
    spec = _spec(tmp_path, "moe-dp", topology="{tp: 2, dp: 2, ep: 4}", model=MOE)
    gates = _gates(cli, spec)
    assert set(gates) == {"step_batch_descriptor", "dp_idle_dummy_batch", "skip_drafts",
                          "draft_batch_descriptor"}
    assert {g["family"] for g in gates.values()} == {"ep"}
    idle = gates["dp_idle_dummy_batch"]
    assert ("all_reduce", "dp") in {(s["op"], s["family"]) for s in idle["selects"]}
    assert "DPEngineCoreProc.run_busy_loop" in idle["function"]
    assert "sync_cudagraph_and_dp_padding" in gates["step_batch_descriptor"]["agreed_by"]
    assert _gate_findings(cli, spec) == []


def test_dense_dp_ranks_are_independent_engines(cli, tmp_path):
    # Non-MoE DP ranks never step together: no idle dummy batch, each replica agrees alone.
    spec = _spec(tmp_path, "dense-dp", topology="{tp: 2, dp: 2}")
    gates = _gates(cli, spec)
    assert "dp_idle_dummy_batch" not in gates
    assert gates["step_batch_descriptor"]["family"] == "replica"
    assert _gate_findings(cli, spec) == []


def test_ngram_has_no_drafter_gates(cli, tmp_path):
    spec = _spec(tmp_path, "ngram", topology="{tp: 2}", method="ngram")
    assert set(_gates(cli, spec)) == {"step_batch_descriptor"}


def test_adaptive_verify_budget_is_agreed_by_no_group(cli, tmp_path):
    tp = _spec(tmp_path, "adaptive-tp", topology="{tp: 2}", method="dspark", extra=ADAPTIVE)
    gate = _gates(cli, tp)["adaptive_verify_budget"]
    assert gate["family"] is None and "_stale_confidences" in gate["agreed_by"]
    [found] = _gate_findings(cli, tp)
    assert (found["gate"], found["group"], found["round"]) == ("adaptive_verify_budget", "tp", "decode")
    assert "agreed by no group" in found["message"] and "all_reduce over tp" in found["message"]
    assert "AdaptiveVerificationManager.get_num_tokens" in found["message"]
    pcp = _spec(tmp_path, "adaptive-pcp", topology="{tp: 2, cp: 2}", method="dspark", extra=ADAPTIVE)
    assert sorted(f["group"] for f in _gate_findings(cli, pcp)) == ["pcp", "tp"]
    # One rank decides for itself alone: nothing to disagree with.
    alone = _spec(tmp_path, "adaptive-1", topology="{tp: 1}", method="dspark", extra=ADAPTIVE)
    assert _gate_findings(cli, alone) == []
    # Without the key in --speculative-config the budget is fixed: no gate.
    fixed = _spec(tmp_path, "fixed", topology="{tp: 2, cp: 2}", method="dspark")
    assert "adaptive_verify_budget" not in _gates(cli, fixed)


def test_specplan_agrees_the_adaptive_budget_over_tp_and_pcp(cli, tmp_path):
    spec = _spec(tmp_path, "own-adaptive", topology="{tp: 2, cp: 2}", method="dspark",
                 behaviour="specplan", extra=ADAPTIVE)
    gate = _gates(cli, spec)["adaptive_verify_budget"]
    assert gate["family"] == "replica" and "converge of its own over replica" in gate["agreed_by"]
    assert _gate_findings(cli, spec) == []


def test_batch_sharded_sampling_owner_rows(cli, tmp_path):
    spec = _spec(tmp_path, "sharded", topology="{tp: 4}",
                 extra='engine_args: ["--enable-batch-sharded-sampling"]\n')
    owner = _gates(cli, spec)["batch_shard_owner"]
    assert owner["family"] == "tp" and owner["input"] == "batch_local"
    assert {(s["op"], s["family"]) for s in owner["selects"]} == {("all_to_all", "tp"), ("all_gather", "tp")}
    assert _gate_findings(cli, spec) == []
    off = _spec(tmp_path, "unsharded", topology="{tp: 4}",
                extra='engine_args: ["--enable-batch-sharded-sampling", '
                      '"--no-enable-batch-sharded-sampling"]\n')
    assert "batch_shard_owner" not in _gates(cli, off)
