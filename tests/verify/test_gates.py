"""Gates through the CLI: check's verdict per gate class (DESIGN.md §7 item 6), specplan's own
plan agreeing each gate over the union of the groups it selects, and plan.json carrying them.

Each spec is written as an operator would (`behaviour: engine` models SGLang 0.5.23's code);
the expected verdicts are read from that code (engines/sglang/gates.py cites the functions).
"""

from __future__ import annotations

import json

import pytest

MODEL = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
MOE = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}\n"


def _spec(tmp_path, name, *, behaviour="engine", topology, model=MODEL, method="dspark",
          extra="", engine="sglang"):
    path = tmp_path / f"{name}.yaml"
    taps = ", aux_layers: [1, 3, 5]" if method in ("dspark", "dflash", "eagle3") else ""
    path.write_text(f"name: {name}\nengine: {engine}\nbehaviour: {behaviour}\n"
                    f"topology: {topology}\n{model}"
                    f"speculative: {{method: {method}, num_steps: 3, sampling: greedy{taps}}}\n{extra}")
    return str(path)


def _gate_findings(cli, spec) -> list[dict]:
    run = cli("check", spec, "--json", code=(0, 3))
    return [f for f in json.loads(run.stdout)["findings"] if "gate" in f]


def _plan(cli, spec, tmp_path) -> dict:
    """What the plan holds, from `explain --json` (compile refuses a plan with ERRORs): its
    sites, gates (name as `name`) and boundaries."""
    data = json.loads(cli("explain", spec, "--json").stdout)["round"]
    for gate in data["gates"]:
        gate["name"] = gate["gate"]
    for site in data["sites"]:
        site["name"] = site["site"]
    return data


DPA_MOE = "{tp: 8, dp: 8, dp_attention: true, dp_lm_head: true, device: cuda}"


def test_dspark_memory_gate_on_a_one_rank_sync_group_is_an_error(cli, tmp_path):
    spec = _spec(tmp_path, "v4", topology=DPA_MOE, model=MOE)
    found = _gate_findings(cli, spec)
    assert [(f["gate"], f["group"], f["round"]) for f in found] == [
        ("dspark_draft_graph_mem", "tp", "startup")]
    message = found[0]["message"]
    assert "agreed by no group" in message and "capture over tp (8 ranks" in message
    assert "DSparkWorkerV2.init_cuda_graphs" in message and "SpecTpSync.__init__" in message


def test_dspark_memory_gate_with_a_dense_draft_stays_in_attention_tp(cli, tmp_path):
    # A dense draft under DP-attention runs on attention TP (resolve_draft_parallel_layout),
    # one rank here: the capture waits on no peer.
    spec = _spec(tmp_path, "dense", topology=DPA_MOE)
    assert _gate_findings(cli, spec) == []


def test_dspark_memory_gate_over_tp_is_clean_and_off_is_an_error(cli, tmp_path):
    on = _spec(tmp_path, "on", topology="{tp: 2, device: cuda}")
    assert _gate_findings(cli, on) == []
    off = _spec(tmp_path, "off", topology="{tp: 2, device: cuda}", extra="sync: {policy: off}\n")
    found = _gate_findings(cli, off)
    assert [(f["gate"], f["group"]) for f in found] == [("dspark_draft_graph_mem", "tp")]
    assert "SGLANG_SPEC_TP_SYNC leaves dspark-mem off" in found[0]["message"]


def test_dflash_memory_gate(cli, tmp_path):
    on = _spec(tmp_path, "df", method="dflash", topology="{tp: 4, device: cuda}")
    assert _gate_findings(cli, on) == []
    off = _spec(tmp_path, "dfoff", method="dflash", topology="{tp: 4, device: cuda}",
                extra="sync: {policy: off}\n")
    assert [f["gate"] for f in _gate_findings(cli, off)] == ["dflash_draft_graph_mem"]
    # Under DP-attention SGLang never captures the DFlash draft graph: no gate at all.
    dpa = _spec(tmp_path, "dfdpa", method="dflash", model=MOE,
                topology="{tp: 4, dp: 2, dp_attention: true, dp_lm_head: true, device: cuda}")
    assert "dflash_draft_graph_mem" not in {g["name"] for g in _plan(cli, dpa, tmp_path)["gates"]}


@pytest.mark.parametrize("method", ["eagle", "dspark"])
def test_dp_attention_round_gates_ride_the_token_count_gather(cli, tmp_path, method):
    spec = _spec(tmp_path, f"dpa-{method}", method=method, model=MOE,
                 topology="{tp: 4, dp: 4, dp_attention: true, dp_lm_head: true, device: cuda}")
    gates = {g["name"]: g for g in _plan(cli, spec, tmp_path)["gates"]}
    want = {"dp_padding_mode", "dp_idle_forward", "target_graph"}
    want |= {"eagle_draft_graph"} if method == "eagle" else {"dspark_draft_graph_mem"}
    assert set(gates) == want
    for name in want - {"dspark_draft_graph_mem"}:
        assert gates[name]["family"] == "tp" and gates[name]["input"] == "global"
        assert "prepare_mlp_sync_batch_raw" in gates[name]["agreed_by"]
    assert [f["gate"] for f in _gate_findings(cli, spec)] == (
        ["dspark_draft_graph_mem"] if method == "dspark" else [])


def test_specplan_agrees_each_gate_over_the_union_of_its_groups(cli, tmp_path):
    spec = _spec(tmp_path, "own", behaviour="specplan", topology=DPA_MOE, model=MOE)
    plan = _plan(cli, spec, tmp_path)
    gate = next(g for g in plan["gates"] if g["name"] == "dspark_draft_graph_mem")
    assert (gate["family"], gate["site"]) == ("tp", "dspark_mem")
    site = next(s for s in plan["sites"] if s["name"] == "dspark_mem")
    assert (site["family"], site["converge"], site["trivial"]) == ("tp", True, False)
    assert any(b["family"] == "tp" and b["op"] == "all_reduce_min" and b["round"] == "startup"
               for b in plan["boundaries"])
    others = [g for g in plan["gates"] if g["phase"] == "decode"]
    assert others and all(g["family"] == "tp" and "token-count" in g["agreed_by"] for g in others)
    assert _gate_findings(cli, spec) == []


def test_specplan_turning_its_own_carrier_off_is_an_error(cli, tmp_path):
    spec = _spec(tmp_path, "ownoff", behaviour="specplan", topology=DPA_MOE, model=MOE,
                 extra="sync: {sites: {dspark_mem: 'off'}}\n")
    assert [f["gate"] for f in _gate_findings(cli, spec)] == ["dspark_draft_graph_mem"]


@pytest.mark.parametrize("method", ["dspark", "dflash"])
def test_dp_attention_without_the_dp_lm_head_is_refused(cli, tmp_path, method):
    spec = _spec(tmp_path, f"nolm-{method}", method=method, model=MOE,
                 topology="{tp: 4, dp: 4, dp_attention: true, device: cuda}")
    run = cli("check", spec, "--json", code=3)
    messages = [f["message"] for f in json.loads(run.stdout)["findings"]]
    assert any("--enable-dp-lm-head" in m and f"_handle_{method}" in m for m in messages)


ADAPTIVE = ('engine_args: ["python -m sglang.launch_server", "--tp 4", '
            '"--speculative-algorithm EAGLE", "--speculative-adaptive"]\n')


@pytest.mark.parametrize("behaviour", ["engine", "specplan"])
def test_adaptive_step_count_is_agreed_through_the_accept_lengths(cli, tmp_path, behaviour):
    spec = _spec(tmp_path, f"ad-{behaviour}", behaviour=behaviour, method="eagle",
                 topology="{tp: 4, device: cuda}", extra=ADAPTIVE)
    gates = {g["name"]: g for g in _plan(cli, spec, tmp_path)["gates"]}
    assert set(gates) == {"eagle_adaptive_steps"}
    gate = gates["eagle_adaptive_steps"]
    assert gate["function"].endswith("AdaptiveController.on_verify_complete")
    assert gate["site"] == ("eagle_accept" if behaviour == "specplan" else None)
    assert _gate_findings(cli, spec) == []


def test_without_the_flag_or_under_dp_attention_there_is_no_adaptive_gate(cli, tmp_path):
    plain = _spec(tmp_path, "noad", method="eagle", topology="{tp: 4, device: cuda}")
    assert _plan(cli, plain, tmp_path)["gates"] == []
    dpa = _spec(tmp_path, "addpa", method="eagle", model=MOE,
                topology="{tp: 4, dp: 4, dp_attention: true, device: cuda}", extra=ADAPTIVE)
    assert "eagle_adaptive_steps" not in {g["name"] for g in _plan(cli, dpa, tmp_path)["gates"]}


def test_a_line_without_cuda_graphs_takes_no_capture_gate(cli, tmp_path):
    spec = _spec(tmp_path, "nograph", topology=DPA_MOE, model=MOE,
                 extra='engine_args: ["python -m sglang.launch_server", "--disable-cuda-graph"]\n')
    names = {g["name"] for g in _plan(cli, spec, tmp_path)["gates"]}
    assert "dspark_draft_graph_mem" not in names and "target_graph" not in names
    assert {"dp_padding_mode", "dp_idle_forward"} <= names
    assert _gate_findings(cli, spec) == []


def _ragged(*extra: str) -> str:
    args = ", ".join(f'"{a}"' for a in ("SGLANG_RAGGED_VERIFY_MODE=compact",
                                          "python -m sglang.launch_server", *extra))
    return f"engine_args: [{args}]\n"


def test_dspark_verify_budget_from_an_event_query_is_an_error(cli, tmp_path):
    spec = _spec(tmp_path, "budget", topology="{tp: 4, device: cuda}", extra=_ragged())
    found = _gate_findings(cli, spec)
    assert [(f["gate"], f["group"], f["round"]) for f in found] == [
        ("dspark_verify_budget", "tp", "decode")]
    assert "broadcast and all_reduce over tp" in found[0]["message"]
    assert "ConfidenceRelay.resolve" in found[0]["message"]


def test_dspark_verify_budget_in_step_is_still_each_ranks_own(cli, tmp_path):
    # Without overlap the budget is computed in step, from this rank's own confidences: no
    # site broadcasts them (sglang PR #31195's logs), so the gate stays an ERROR.
    in_step = _spec(tmp_path, "nooverlap", topology="{tp: 4, device: cuda}",
                    extra=_ragged("--disable-overlap-schedule"))
    [found] = _gate_findings(cli, in_step)
    assert (found["gate"], found["group"]) == ("dspark_verify_budget", "tp")
    assert "computed in step (DSparkVerifyPlanner.compute_budget_sync)" in found["message"]


def test_dspark_verify_budget_clean_where_it_is_not_rank_local(cli, tmp_path):
    static = _spec(tmp_path, "static", topology="{tp: 4, device: cuda}")
    assert "dspark_verify_budget" not in {g["name"] for g in _plan(cli, static, tmp_path)["gates"]}
    alone = _spec(tmp_path, "alone", topology="{tp: 1, device: cuda}", extra=_ragged())
    assert _gate_findings(cli, alone) == []
    own = _spec(tmp_path, "own-budget", behaviour="specplan", topology="{tp: 4, device: cuda}",
                extra=_ragged())
    gate = next(g for g in _plan(cli, own, tmp_path)["gates"] if g["name"] == "dspark_verify_budget")
    assert (gate["family"], gate["site"]) == ("replica", "dspark_plan_verify")
    assert _gate_findings(cli, own) == []
