"""The runtime on real gloo ranks (subprocesses over loopback): bind, fused converges, guard
headers, timeouts, dead ranks, the probe and the trace."""

from __future__ import annotations

import json
import time

import pytest

from specplan.mesh.family import from_rule
from tests.helpers import compile_spec
from tests.ranks import launch
import specs_rt

ENGINES = [  # (spec, world): tp 2; tp 4 DP-attention dp 2 MoE; pp 2; tp 4 x pp 2 with ring relays
    pytest.param(specs_rt.TP2_DSPARK, 2, id="tp2-dspark"),
    pytest.param(specs_rt.TP4_DPATTN_EAGLE, 4, id="tp4-dpattn-eagle"),
    pytest.param(specs_rt.PP2_EAGLE3, 2, id="pp2-eagle3"),
    pytest.param(specs_rt.TP4_PP2_DSPARK_RING, 8, id="tp4-pp2-dspark-ring", marks=specs_rt.EIGHT_RANKS),
]


def _own_groups(plan: dict, rank: int) -> dict:
    out = {}
    for f in plan["families"]:
        out[f["name"]] = next(g for g in from_rule(f["name"], f["rule"]).groups() if rank in g)
    return out


@pytest.mark.parametrize("text, world", [ENGINES[0], ENGINES[1], ENGINES[3]])
def test_bind_creates_every_group_of_the_plan(tmp_path, text, world):
    path = compile_spec(tmp_path, text)
    plan = json.loads(path.read_text())
    results = launch(world, "bindonly", path)
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["backend"] == "gloo"
        assert r.result["groups"] == _own_groups(plan, r.rank)


def test_bind_refuses_a_rank_with_another_plan(tmp_path):
    a = compile_spec(tmp_path / "a", specs_rt.TP2_DSPARK)
    b = compile_spec(tmp_path / "b", specs_rt.TP2_DSPARK.replace("max_batch: 8", "max_batch: 4"))
    fa, fb = (json.loads(p.read_text())["fingerprint"] for p in (a, b))
    results = launch(2, "bindonly", a, b)
    for r in results:
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.error.startswith("ERROR FingerprintMismatch:")
        assert f"rank 0 has {fa}" in r.error and f"rank 1 has {fb}" in r.error


def test_bind_refuses_a_plan_for_another_world_size(tmp_path):
    two = compile_spec(tmp_path / "a", specs_rt.TP2_DSPARK.replace("timeout_s: 20", "timeout_s: 4"))
    four = compile_spec(tmp_path / "b", specs_rt.TP4_DPATTN_EAGLE.replace("timeout_s: 20", "timeout_s: 4"))
    results = launch(2, "bindonly", two, four)
    assert results[1].returncode == 3
    assert "WorldSizeMismatch: at process-group start" in results[1].error
    assert "is for 4 ranks, but rank 1 was started in a world of 2" in results[1].error
    assert results[0].returncode == 3
    # rank 0 waits for a rank that stopped: its error points at that rank's own
    assert "CollectiveTimeout: at process-group start" in results[0].error
    assert "a rank stopped before it joined (its own error says why)" in results[0].error


@pytest.mark.parametrize("text, world", ENGINES)
def test_every_fused_site_converges_to_its_source(tmp_path, text, world):
    path = compile_spec(tmp_path, text)
    results = launch(world, "engine", path, 3)
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["checks"] > 0


def test_a_rank_out_of_order_meets_a_header_mismatch_within_the_round(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "engine", path, 3, "skip:1:2:3")  # rank 1 skips boundary 3 in round 2
    err = results[1].error
    assert results[1].returncode == 3
    assert err.startswith("ERROR DesyncError: desync at site dspark_accept_greedy (boundary 4), round 2")
    assert "rank 1 expected [boundary 4" in err and "received from rank 0 [boundary 3 (dspark_plan_verify+dspark_plan), round 2" in err
    assert results[0].returncode == 3 and "CollectiveTimeout" in results[0].error


def test_a_dead_rank_becomes_an_error_on_every_other_rank(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP4_DPATTN_EAGLE)
    start = time.monotonic()
    results = launch(4, "engine", path, 5, "die:3:2", timeout=60)
    assert time.monotonic() - start < 60
    assert results[3].returncode == -9
    for r in results[:3]:
        assert r.returncode == 3, r.stdout + r.stderr
        assert "ERROR CollectiveTimeout:" in r.error and "on group" in r.error
    assert all(r.returncode is not None for r in results)  # every child reaped


def test_a_stalled_rank_times_out_naming_site_round_and_group(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK.replace("timeout_s: 20", "timeout_s: 2"))
    results = launch(2, "engine", path, 3, "stall:1:2:6", timeout=40)
    err = results[0].error
    assert results[0].returncode == 3
    assert "ERROR CollectiveTimeout: collective for site dspark_draft (boundary 2, broadcast) at round 2" in err
    assert "on group replica [0, 1]" in err


def _local_plan(tmp_path):
    trace = tmp_path / "trace"
    text = specs_rt.TP2_OFF.replace("probe_every: 1", f"probe_every: 1, trace_dir: '{trace}'")
    return compile_spec(tmp_path, text), trace


def test_the_probe_checks_unconverged_decisions_and_catches_a_plant(tmp_path):
    path, _ = _local_plan(tmp_path)
    clean = launch(2, "local", path, 3)
    assert [r.result["probes"] for r in clean] == [3, 3]
    results = launch(2, "local", path, 4, "plant:1:3")
    for r in results:
        assert r.returncode == 3
        assert r.error.startswith("ERROR ProbeMismatch: agreement probe: decision draft_tokens differs at round 3")
        assert "ranks [0]: hash" in r.error and "ranks [1]: hash" in r.error


def test_trace_and_diff_find_a_planted_divergence(tmp_path):

    from tests.helpers import cli

    path, trace = _local_plan(tmp_path)
    launch(2, "local", path, 4, "plant:1:3")
    files = sorted(str(p) for p in trace.glob("rank*.jsonl"))
    assert len(files) == 2
    out = cli("diff", *files)
    assert out.exit_code == 3, out.output
    assert out.output.startswith("first divergence: round 3, site dspark_draft, decision draft_tokens, "
                                 "replica 0, requests ['req0', 'req1', 'req2', 'req3']")
    assert "ranks [0]" in out.output and "ranks [1]" in out.output
