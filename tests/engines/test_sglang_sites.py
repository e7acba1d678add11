"""The SGLang plugin's converge sites beyond DSpark's accept, on SGLang 0.5.23's real functions
(tests/engines/sglang_site_workers.py), gloo ranks, the plugin loaded by SGLang's loader.

Every rank feeds SGLang's function its own inputs, as differing float logits or coins would:
through the plugin each replica ends with its plan source's values from one guarded collective
per round; without it, ranks keep their own (or get rank 0's over a group spanning replicas).
A rank that claims another round in its guard header is caught with a DesyncError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_plugin import widths
from wheels import engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines

TOPOLOGY = {"tp2": ("{tp: 2, device: cpu}", dict(tp=2)),
            "dpattn": ("{tp: 4, dp: 2, dp_attention: true, device: cpu}", dict(tp=4, dp=2)),
            "dpcp": ("{tp: 4, dp: 2, dp_attention: true, cp: 2, device: cpu}", dict(tp=4, dp=2, cp=2)),
            "tp8": ("{tp: 8, device: cpu}", dict(tp=8))}
ENGINE = {"eagle3": dict(speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
                         speculative_num_draft_tokens=4),
          "dspark": dict(speculative_algorithm="DSPARK", speculative_num_steps=3, speculative_eagle_topk=1,
                         speculative_num_draft_tokens=4),
          "dflash": dict(speculative_algorithm="DFLASH", speculative_num_steps=3, speculative_eagle_topk=1,
                         speculative_num_draft_tokens=4)}
SOURCES = {"tp2": {0: 0, 1: 0}, "dpattn": {0: 0, 1: 0, 2: 2, 3: 2}, "dpcp": {0: 0, 1: 0, 2: 2, 3: 2},
           "tp8": dict.fromkeys(range(8), 0)}


def plan(tmp: Path, method: str, topo: str) -> Path:
    return compile_spec(tmp / f"{method}-{topo}", f"""
name: sites-{method}-{topo}
engine: sglang
topology: {TOPOLOGY[topo][0]}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: 3, sampling: sampling}}
sync: {{policy: all}}
runtime: {{max_batch: 8, timeout_s: 60}}
""")


def run(worker: str, method: str, topo: str, arg: str, tmp: Path | None, forge: str = "",
        hot_path: str = "auto") -> list[dict]:
    world = len(SOURCES[topo])
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "SPECPLAN_PLAN": str(plan(tmp, method, topo)) if tmp else "", "SPECPLAN_HOT_PATH": hot_path}
    root = engine_root("sglang")
    results = launch(world, worker, str(root), json.dumps(widths(**TOPOLOGY[topo][1])),
                     json.dumps(ENGINE[method]), arg, forge, module="sglang_site_workers",
                     preload=forkserver(root), path=(HERE,), env=env, timeout=600)
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result for r in results]


def hold_their_sources(outs: list[dict], topo: str, keys: tuple[str, ...]) -> None:
    """Each rank ends every round with what its replica source computed alone."""
    for rank, out in enumerate(outs):
        src = SOURCES[topo][rank]
        for rnd, got in enumerate(out["rounds"]):
            mine = {k: got[k] for k in keys}
            theirs = {k: outs[src]["rounds"][rnd]["own"][k] for k in keys}
            assert mine == theirs, f"rank {rank} round {rnd}: {mine}, source {src} computed {theirs}"


def replicas_differ(outs: list[dict], topo: str, keys: tuple[str, ...]) -> bool:
    """Some round where two ranks computed different values alone (else the test shows nothing)."""
    return any(len({json.dumps([out["rounds"][rnd]["own"][k] for k in keys]) for out in outs}) > 1
               for rnd in range(len(outs[0]["rounds"])))


EAGLE = ("predict", "accept_lens", "accept_index")


@pytest.mark.parametrize("topo", ["tp2", "dpattn", pytest.param("tp8", marks=pytest.mark.slow)])
def test_eagle_accept_converges_through_the_plugin_as_one_collective(tmp_path, topo):
    # eagle_sample's HIP greedy branch broadcasts its three tensors; through the plugin they are
    # skipped and the plan's one guarded collective carries them.
    outs = run("eagle", "eagle3", topo, "1", tmp_path)
    assert replicas_differ(outs, topo, EAGLE)
    hold_their_sources(outs, topo, EAGLE)
    for out in outs:
        assert [r["broadcasts"] for r in out["rounds"]] == [1, 1, 1]
        assert out["skipped"] == 9  # SGLang's three per round


def test_eagle_accept_without_the_plugin_diverges_within_a_replica():
    # CUDA / CPU greedy: eagle_sample broadcasts nothing, so each rank keeps its own accept.
    outs = run("eagle", "eagle3", "dpattn", "0", None)
    assert all(r["broadcasts"] == 0 for out in outs for r in out["rounds"])
    with pytest.raises(AssertionError, match="rank 1 round 0"):
        hold_their_sources(outs, "dpattn", EAGLE)


def test_eagle_accept_under_attention_cp_converges_only_through_the_plugin(tmp_path):
    # attn_tp is one rank: even the HIP branch broadcasts nothing; the plan's replica is [0,1] [2,3].
    hold_their_sources(run("eagle", "eagle3", "dpcp", "1", tmp_path), "dpcp", EAGLE)
    with pytest.raises(AssertionError, match="rank 1 round 0"):
        hold_their_sources(run("eagle", "eagle3", "dpcp", "1", None), "dpcp", EAGLE)


SITES = {  # worker -> (method, what each rank ends with, SGLang's broadcasts per round)
    "dspark_plan": ("dspark", ("verify_lens",), 1),
    "dspark_draft": ("dspark", ("draft_tokens",), 3),  # one per Markov step (gamma 3)
    "dflash_accept": ("dflash", ("accept_len", "bonus", "commit_lens", "out_tokens"), 2),
}


@pytest.mark.parametrize("worker", sorted(SITES))
@pytest.mark.parametrize("topo", ["tp2", "dpattn", pytest.param("tp8", marks=pytest.mark.slow)])
def test_site_is_the_plans_one_boundary_per_round(tmp_path, worker, topo):
    method, keys, _ = SITES[worker]
    outs = run(worker, method, topo, "tp_group", tmp_path)
    assert replicas_differ(outs, topo, keys)
    hold_their_sources(outs, topo, keys)
    if worker == "dspark_plan":  # the budget the lens were planned under converged with them
        hold_their_sources(outs, topo, ("budget",))
    for out in outs:
        assert [r["broadcasts"] for r in out["rounds"]] == [1, 1, 1]


@pytest.mark.parametrize("worker", sorted(SITES))
def test_site_without_the_plugin_overwrites_replica_one(worker):
    # SpecTpSync on the whole TP group (SGLANG_SPEC_TP_SYNC=all): rank 0 overwrites replica 1.
    method, keys, broadcasts = SITES[worker]
    outs = run(worker, method, "dpattn", "tp_group", None)
    assert outs[0]["rounds"][0]["broadcasts"] == broadcasts
    with pytest.raises(AssertionError, match="rank 2 round 0"):
        hold_their_sources(outs, "dpattn", keys)


@pytest.mark.parametrize("worker, method", [("eagle", "eagle3"), ("dspark_plan", "dspark"),
                                            ("dspark_draft", "dspark"), ("dflash_accept", "dflash")])
def test_a_forged_guard_header_is_caught(tmp_path, worker, method):
    # Rank 1 claims round 7 at round 2: it receives its source's header for round 2 and raises.
    outs = run(worker, method, "tp2", "1" if worker == "eagle" else "tp_group", tmp_path, forge="1:2")
    assert all("desync" not in r for r in outs[0]["rounds"] + outs[1]["rounds"][:2])
    err = outs[1]["rounds"][2]["desync"]
    assert "round" in err and "rank 1" in err, err


@pytest.mark.parametrize("hot_path", ["device", "host"])
def test_the_device_path_raises_at_sglangs_result_processing_before_the_round_commits(tmp_path, hot_path):
    """Device path (forced on CPU ranks): the forged header of rank 1's round 2 accept is
    compared on the device and nothing raises in the converge; SGLang's
    process_batch_result_decode, hooked, reads the flag after its wait for the result copy and
    raises DesyncError before SGLang commits round 2. Host path: the converge itself raised."""
    outs = run("eagle_results", "eagle3", "tp2", "1", tmp_path, forge="1:2", hot_path=hot_path)
    assert [r.get("committed") for r in outs[0]["rounds"]] == [True, True, True]
    assert [r.get("committed") for r in outs[1]["rounds"][:2]] == [True, True]
    err = outs[1]["rounds"][2]["desync"]
    assert "committed" not in outs[1]["rounds"][2] and "rank 1" in err, err
    assert ("read at check_round" in err) == (hot_path == "device"), err
