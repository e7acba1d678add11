"""The SGLang plugin against SGLang 0.5.23's real code, on gloo ranks (tests/engines/sglang_workers.py).

Every run loads the plugin through `sglang.srt.plugins.load_plugins` (the entry point of the
editable install) and builds the groups with SGLang's own initialize_model_parallel.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from wheels import engine_root

from specplan.plan import fingerprint
from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines
REFUSED = 4

SPECS = {
    "tp2": dict(topology="{tp: 2, device: cpu}", widths=dict(tp=2)),
    "dpattn": dict(topology="{tp: 4, dp: 2, dp_attention: true, device: cpu}", widths=dict(tp=4, dp=2)),
    "tp4pp2": dict(topology="{tp: 4, pp: 2, device: cpu}", widths=dict(tp=4, pp=2)),
    "tp8": dict(topology="{tp: 8, device: cpu}", widths=dict(tp=8)),
    "dpcp": dict(topology="{tp: 4, dp: 2, dp_attention: true, cp: 2, device: cpu}",
                 widths=dict(tp=4, dp=2, cp=2)),
}
SPECULATIVE = dict(speculative_algorithm="DSPARK", speculative_num_steps=3, speculative_eagle_topk=1,
                   speculative_num_draft_tokens=4)


def plan_for(tmp: Path, name: str, method: str = "dspark", extra: str = "") -> Path:
    return compile_spec(tmp / name, f"""
name: sg-{name}
engine: sglang
topology: {SPECS[name]['topology']}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: 3, sampling: sampling}}
runtime: {{max_batch: 8, timeout_s: 120}}
{extra}""")


def widths(tp: int, pp: int = 1, dp: int = 1, cp: int = 1) -> dict:
    """SGLang's parallel context for a launch of tp x pp ranks (dp > 1: DP-attention)."""
    return dict(tp_size=tp, pp_size=pp, attn_dp_size=dp, attn_cp_size=cp, attn_tp_size=tp // dp // cp,
                moe_ep_size=1, moe_dp_size=1, moe_tp_size=tp, attn_dcp_size=1,
                shared_experts_tp_size=None, attn_dp_enabled=dp > 1)


def run(world: int, worker: str, *args, plan: Path | None, timeout: float = 600,
        version: str | None = None):
    """`version`: that SGLang release's wheel (default: the newest, or SPECPLAN_SGLANG_RELEASE)."""
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "SPECPLAN_PLAN": str(plan or "")}
    root = engine_root("sglang", version)
    return launch(world, worker, str(root), *args, module="sglang_workers", preload=forkserver(root),
                  path=(HERE,), env=env, timeout=timeout)


def ok(results) -> list[dict]:
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result for r in results]


def start(world: int, name: str, tmp: Path, engine: dict | None = None, spec: dict | None = None,
          version: str | None = None):
    plan = plan_for(tmp, name)
    eng = engine or widths(**SPECS[name]["widths"])
    return plan, run(world, "startup", json.dumps(eng), json.dumps(spec or SPECULATIVE), plan=plan,
                     version=version)


def test_set_installs_each_hook_once_however_often_registered(tmp_path):
    [out] = ok(run(1, "plugins", plan=plan_for(tmp_path, "tp2")))
    assert len(out["hooks"]) == 13 and out["per_target"] == [1]


def test_unset_installs_no_hook_and_imports_no_runtime():
    [out] = ok(run(1, "plugins", plan=None))
    assert out["hooks"] == []
    # the entry point's module and its torch-free hook class only: no plan, no runtime, no torch
    assert out["imported"] == ["specplan.plugins.roles", "specplan.plugins.sglang", "specplan.plugins.sglang_sites"]


@pytest.mark.parametrize("world, name", [(2, "tp2"), (4, "dpattn"),
                                         pytest.param(8, "tp8", marks=pytest.mark.slow)])
def test_the_plans_topology_passes_and_binds_on_sglangs_groups(tmp_path, world, name):
    plan, results = start(world, name, tmp_path)
    outs = ok(results)
    assert len(outs[0]["hooks"]) == 13
    view = json.loads(plan.read_text())
    replica = next(f for f in view["families"] if f["name"] == "replica")
    from specplan.mesh.family import from_rule

    fam = from_rule("replica", replica["rule"])
    first = next(b for b in view["boundaries"] if b["family"] == "replica")
    for rank, out in enumerate(outs):
        group = fam.groups()[fam.locate(rank)[0]]  # the source decides on the last stage
        assert out["bound"] == {"replica": group, "source": group[first["source_member"]]}


@pytest.mark.slow
def test_a_pipeline_plan_converging_over_stages_is_refused_on_every_rank_before_it_can_hang(tmp_path):
    # SGLang runs the accept on the last stage only: a replica-wide converge (relay broadcast)
    # would hang; SGLang's default plan (relay ring) runs: tests/engines/test_sglang_pp.py
    plan = plan_for(tmp_path, "tp4pp2", "eagle", "pipeline: {relay: broadcast}\n")
    spec = dict(SPECULATIVE, speculative_algorithm="EAGLE")
    for r in run(8, "startup", json.dumps(widths(tp=4, pp=2)), json.dumps(spec), plan=plan):
        assert r.returncode == REFUSED, (r.stdout[-500:], r.stderr[-2000:])
        assert "has pp 2" in r.stdout and "would hang" in r.stdout, r.stdout[-500:]
        assert "pipeline.relay: ring" in r.stdout, r.stdout[-500:]


def test_another_topology_is_refused_on_every_rank_naming_family_rank_and_values(tmp_path):
    # The plan is DP-attention (attn_tp [0,1] [2,3]); the engine starts plain tp 4.
    _, results = start(4, "dpattn", tmp_path, engine=widths(tp=4))
    for r in results:
        assert r.returncode == REFUSED, (r.stdout[-500:], r.stderr[-2000:])
        own = [0, 1] if r.rank < 2 else [2, 3]
        assert f"REFUSED specplan: rank {r.rank}: the sglang deployment is not plan 'sg-dpattn'" in r.stdout
        assert f"attn_tp: engine [0..3], plan [{own[0]},{own[1]}]" in r.stdout


def test_other_speculative_settings_are_refused(tmp_path):
    _, results = start(2, "tp2", tmp_path, spec=dict(SPECULATIVE, speculative_num_steps=5))
    for r in results:
        assert r.returncode == REFUSED and "num_steps: engine 5, plan 3" in r.stdout, r.stdout[-500:]


def test_a_plan_for_another_world_size_is_refused(tmp_path):
    plan = plan_for(tmp_path, "dpattn")
    for r in run(2, "startup", json.dumps(widths(tp=2)), json.dumps(SPECULATIVE), plan=plan):
        assert r.returncode == REFUSED
        assert (f"REFUSED specplan: SPECPLAN_PLAN={plan}: foreign plan: plan 'sg-dpattn' is for 4 ranks, "
                f"the engine started 2 (this is rank {r.rank})") in r.stdout


def test_bad_plans_refuse_at_plugin_load_with_one_line(tmp_path):
    missing = tmp_path / "none.json"
    [r] = run(1, "plugins", plan=missing)
    assert r.returncode == REFUSED and r.stdout.strip() == f"REFUSED specplan: SPECPLAN_PLAN={missing}: no such file"
    other = tmp_path / "vllm.json"
    foreign = dict(json.loads(plan_for(tmp_path, "tp2").read_text()), engine="vllm")
    foreign["fingerprint"] = fingerprint(foreign)  # a whole plan, not a hand edit, for another engine
    other.write_text(json.dumps(foreign))
    [r] = run(1, "plugins", plan=other)
    assert r.returncode == REFUSED and "is for engine 'vllm', this is sglang" in r.stdout


def test_another_sglang_version_is_refused_naming_the_supported_ones(tmp_path):
    dist = tmp_path / "site" / "sglang-0.5.19.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.19\n")
    [r] = run(1, "plugins", str(dist.parent), plan=plan_for(tmp_path, "tp2"))
    assert r.returncode == REFUSED
    assert ("REFUSED specplan: sglang 0.5.19 is not a supported engine version (supported: sglang "
            "0.5.22 / 0.5.23, vllm 0.30.x / 0.31.x / 0.32.x / 0.33.0); set "
            "SPECPLAN_ALLOW_UNTESTED_ENGINE=1 to run it untested") in r.stdout


def replicas_hold_their_sources(outs: list[dict], sources: dict[int, int]) -> None:
    """Every rank ends each round with its replica source's accept (bonus = 100 + 10 * rank + round)."""
    for rank, out in enumerate(outs):
        for rnd, got in enumerate(out["rounds"]):
            want = 100 + 10 * sources[rank] + rnd
            assert got["bonus"] == [want] * 4, f"rank {rank} round {rnd}: bonus {got['bonus']}, source " \
                                               f"{sources[rank]} sent {want}"
            assert got["commit_lens"] == [c + 1 for c in got["correct_len"]]
            assert got["new_seq_lens"] == [20 + c for c in got["commit_lens"]]


DPATTN_SOURCES = {0: 0, 1: 0, 2: 2, 3: 2}


def test_dpattn_accept_through_the_plugin_hands_each_replica_its_source(tmp_path):
    # SpecTpSync built on the whole TP group; the plugin converges over the plan's replica instead.
    plan = plan_for(tmp_path, "dpattn")
    outs = ok(run(4, "accept", json.dumps(widths(tp=4, dp=2)), json.dumps(SPECULATIVE), "tp_group",
                  "DSPARK_ACCEPT_SAMPLE", plan=plan))
    replicas_hold_their_sources(outs, DPATTN_SOURCES)
    assert outs[0]["rounds"][1]["correct_len"] != outs[2]["rounds"][1]["correct_len"]  # replicas differ


def test_dpattn_accept_without_the_plugin_overwrites_replica_one(tmp_path):
    # The unhooked engine broadcasts from rank 0 of the TP group: replica 1 gets replica 0's accept.
    outs = ok(run(4, "accept", json.dumps(widths(tp=4, dp=2)), json.dumps(SPECULATIVE), "tp_group",
                  "DSPARK_ACCEPT_SAMPLE", plan=None))
    with pytest.raises(AssertionError, match="rank 2 round 0: bonus \\[100, 100, 100, 100\\], source 2 sent 120"):
        replicas_hold_their_sources(outs, DPATTN_SOURCES)


def test_attention_cp_peers_converge_only_through_the_plugin(tmp_path):
    # SGLang's own choice, get_dp_tp_group(), is attn_tp: one rank under tp 4, dp 2, cp 2, so
    # SpecTpSync turns every site off and the CP peers of a request keep their own accepts
    # (decisions.md 10.2). The plan's replica is attn_cp x attn_tp: [0,1] and [2,3].
    args = (json.dumps(widths(tp=4, dp=2, cp=2)), json.dumps(SPECULATIVE), "dp_tp", "DSPARK_ACCEPT_SAMPLE")
    replicas_hold_their_sources(ok(run(4, "accept", *args, plan=plan_for(tmp_path, "dpcp"))), DPATTN_SOURCES)
    unhooked = ok(run(4, "accept", *args, plan=None))
    with pytest.raises(AssertionError, match="rank 1 round 0: bonus \\[110, 110, 110, 110\\], source 0 sent 100"):
        replicas_hold_their_sources(unhooked, DPATTN_SOURCES)
