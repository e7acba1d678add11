"""Whole topologies on the CPU: one process per rank, the plan's runtime, a verdict.

Default: a small slice (world <= 4, a few rounds). `-m slow`: the issue's whole matrix
(topologies x methods, greedy, token-identical to plain greedy decoding), sampling agreement,
MoE, and the faults (noise under safe for 200 rounds and under off, kill, foreign plan).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from specplan.sim.launch import Options, simulate
from specplan.sim.matrix import METHODS, TOPOLOGIES, spec_text
from specplan.sim.report import summary, verdict
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, text: str, **opts):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    out = simulate(str(path), Options(**{"rounds": 4, "requests": 4, **opts}))
    return out, verdict(out)


def _passes(tmp_path, topology: str, method: str, rounds: int = 4, text: str = "", **kw):
    out, v = _run(tmp_path, text or spec_text(topology, method, **kw), rounds=rounds)
    assert v.ok, v.problems
    assert set(out.returncodes.values()) == {0}
    return out, v


def test_tp2_eagle_chain_is_token_identical_to_greedy_decoding(tmp_path):
    out, v = _passes(tmp_path, "tp2", "eagle-chain")
    assert v.checked == 4 and v.agreed == 4
    s = summary(out)
    assert s["accept_len"] > 1.0  # the drafter is right some of the time
    assert s["collectives"] > 0


def test_tp2_dspark_is_token_identical_to_greedy_decoding(tmp_path):
    _, v = _passes(tmp_path, "tp2", "dspark")
    assert v.checked == 4


def test_dp_attention_replicas_serve_different_requests(tmp_path):
    out, v = _passes(tmp_path, "tp2-dpattn2", "eagle-tree")
    assert v.checked == 4
    served = {x["replica"]: x["requests"] for x in out.results.values()}
    assert served == {0: [0, 2], 1: [1, 3]}


def test_the_cli_runs_pp2_eagle3_and_exits_0(tmp_path):
    spec = tmp_path / "pp2.yaml"
    spec.write_text(spec_text("pp2", "eagle3"))
    done = cli("simulate", spec, "--rounds", "4", process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout and "token-identical to plain greedy decoding" in done.stdout
    assert "tokens/round" in done.stdout and "converge" in done.stdout


def test_noise_under_policy_off_is_stopped_by_the_probe_with_exit_3(tmp_path):
    spec = tmp_path / "off.yaml"
    spec.write_text(spec_text("tp2", "eagle-chain", policy="off"))
    done = cli("simulate", spec, "--rounds", "4", "--inject", "noise")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "agreement probe: decision" in done.stdout and "at round 0" in done.stdout


def test_foreign_plan_is_refused_at_bind(tmp_path):
    out, v = _run(tmp_path, spec_text("tp2", "eagle-chain"), inject="foreign-plan")
    assert not v.ok
    assert all("FingerprintMismatch" in x["error"] for x in out.results.values())


# -- the whole matrix and the faults (.ci/run's second step) -----------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_matrix_greedy_is_token_identical(tmp_path, topology, method):
    _, v = _passes(tmp_path, topology, method, rounds=6)
    assert v.checked == 4


@pytest.mark.slow
@pytest.mark.parametrize("topology", ["tp2", "tp2pp2", "tp4-dpattn2"])
@pytest.mark.parametrize("method", ["eagle-chain", "eagle-tree", "ngram", "dflash", "dspark"])
def test_sampling_ranks_of_a_replica_emit_the_same_tokens(tmp_path, topology, method):
    _, v = _passes(tmp_path, topology, method, rounds=6, sampling="sampling")
    assert v.checked == 0 and v.agreed == 4


@pytest.mark.slow
@pytest.mark.parametrize("topology", ["tp2", "tp4-dpattn2", "tp2-dpattn2"])
def test_moe_experts_over_the_ep_ranks(tmp_path, topology):
    _, v = _passes(tmp_path, topology, "eagle-chain", moe=True)
    assert v.checked == 4


@pytest.mark.slow
@pytest.mark.parametrize("topology", ["tp4-dpattn2", "tp2pp2"])
def test_moe_dispatch_over_ep_2_with_moe_tp_2_or_a_pipeline(tmp_path, topology):
    """ep 2 inside a TP block of 4 (moe_tp 2, DP-attention) and of 2 on each of 2 stages."""
    text = spec_text(topology, "eagle-tree", moe=True).replace(", ep: 4}", "}")
    text = text.replace("topology: {tp: 4, dp: 2, dp_attention: true}",
                        "topology: {tp: 4, dp: 2, dp_attention: true, ep: 2}")
    text = text.replace("topology: {tp: 2, pp: 2}", "topology: {tp: 2, pp: 2, ep: 2}")
    assert "ep: 2}" in text
    _, v = _passes(tmp_path, "", "", text=text)
    assert v.checked == 4


@pytest.mark.slow
def test_noise_under_policy_safe_is_hidden_for_200_rounds(tmp_path):
    out, v = _run(tmp_path, spec_text("tp2", "eagle-chain"), rounds=200, requests=2,
                  inject="noise")
    assert v.ok, v.problems
    assert v.checked == 2


@pytest.mark.slow
def test_noise_under_policy_off_on_dp_attention_names_decision_round_and_ranks(tmp_path):
    out, v = _run(tmp_path, spec_text("tp4-dpattn2", "dspark", policy="off"), inject="noise")
    assert not v.ok
    errors = [x["error"] for x in out.results.values()]
    assert all("ProbeMismatch" in e and "within replica" in e and "round" in e for e in errors)


@pytest.mark.slow
def test_kill_ends_every_other_rank_with_a_clear_error_within_60s(tmp_path):
    t0 = time.monotonic()
    out, v = _run(tmp_path, spec_text("tp2pp2", "eagle3"), rounds=10, inject="kill")
    assert time.monotonic() - t0 < 90
    assert not v.ok
    assert out.returncodes[3] == -9
    for rank in (0, 1, 2):
        assert out.returncodes[rank] == 3
        assert "CollectiveTimeout" in out.results[rank]["error"]
    assert not out.notes  # nobody had to be killed by the launcher
