"""activate(): SPECPLAN_PLAN unset costs nothing; bad plans and versions refuse with one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.plugins import EngineRefused, activate, check_version, check_world, startup_check
from specplan.plugins import common

PLAN = Path(__file__).parents[1] / "golden" / "plans" / "dspark-greedy-dpattn.json"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(common, "_ACTIVE", {})
    monkeypatch.delenv("SPECPLAN_PLAN", raising=False)
    monkeypatch.delenv("SPECPLAN_ALLOW_UNTESTED_ENGINE", raising=False)


def refusal(monkeypatch, value: str, engine: str = "sglang", version: str = "0.5.23") -> str:
    monkeypatch.setenv("SPECPLAN_PLAN", value)
    with pytest.raises(EngineRefused) as err:
        activate(engine, version)
    text = str(err.value)
    assert "\n" not in text and text.startswith("specplan: ")
    return text


def test_unset_is_none_without_reading_anything():
    assert activate("sglang", "0.5.22") is None  # not even the version is looked at


def test_set_loads_once_per_process(monkeypatch):
    monkeypatch.setenv("SPECPLAN_PLAN", str(PLAN))
    first = activate("sglang", "0.5.23")
    assert first.name == "dspark-greedy-dpattn" and first.world_size == 4
    assert activate("sglang", "0.5.23") is first


def test_missing_unreadable_and_malformed_plans(monkeypatch, tmp_path):
    assert refusal(monkeypatch, str(tmp_path / "nope.json")) == \
        f"specplan: SPECPLAN_PLAN={tmp_path / 'nope.json'}: no such file"
    assert refusal(monkeypatch, str(tmp_path)).endswith("is a directory, not a plan.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": \n')
    assert "malformed JSON" in refusal(monkeypatch, str(bad))
    bad.write_text('[1, 2]')
    assert "not a specplan plan" in refusal(monkeypatch, str(bad))
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.json"
        shutil.copy(PLAN, locked)
        locked.chmod(0)
        assert refusal(monkeypatch, str(locked)).endswith("cannot read: Permission denied")


def test_foreign_plans(monkeypatch, tmp_path):
    assert refusal(monkeypatch, str(PLAN), engine="vllm", version="0.33.0").endswith(
        "plan 'dspark-greedy-dpattn' is for engine 'sglang', this is vllm")
    edited = json.loads(PLAN.read_text())
    edited["speculative"]["num_steps"] = 4
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    assert "plan.json was edited after compile" in refusal(monkeypatch, str(path))
    monkeypatch.setenv("SPECPLAN_PLAN", str(PLAN))
    active = activate("sglang", "0.5.23")
    with pytest.raises(EngineRefused, match=r"is for 4 ranks, the engine started 8 \(this is rank 5\)"):
        check_world(active, 8, 5)
    check_world(active, 4, 0)


def test_versions(monkeypatch):
    with pytest.raises(EngineRefused) as err:
        check_version("sglang", "0.5.19")
    assert str(err.value) == ("specplan: sglang 0.5.19 is not a supported engine version (supported: "
                              "sglang 0.5.22 / 0.5.23, vllm 0.30.x / 0.31.x / 0.32.x / 0.33.0); set "
                              "SPECPLAN_ALLOW_UNTESTED_ENGINE=1 to run it untested")
    assert "vllm 0.34.0 is not a supported" in refusal(monkeypatch, str(PLAN), "vllm", "0.34.0")
    assert "vllm 0.33.1 is not a supported" in refusal(monkeypatch, str(PLAN), "vllm", "0.33.1")
    for tested in ("0.30.0", "0.31.2", "0.32.0", "0.32.3", "0.32.0+cpu", "0.33.0"):
        check_version("vllm", tested)
    check_version("sglang", "0.5.22")
    monkeypatch.setenv("SPECPLAN_ALLOW_UNTESTED_ENGINE", "1")
    check_version("sglang", "0.5.19")


def test_an_sglang_release_whose_hooks_differ_is_refused_naming_each_difference(monkeypatch):
    """Even with SPECPLAN_ALLOW_UNTESTED_ENGINE: the table says the hooks do not fit there."""
    monkeypatch.setenv("SPECPLAN_ALLOW_UNTESTED_ENGINE", "1")
    with pytest.raises(EngineRefused) as err:
        check_version("sglang", "0.5.21")
    assert str(err.value) == (
        "specplan: sglang 0.5.21: the plugin's hooks do not fit this release: "
        "speculative.eagle_utils.eagle_sample lacks watermark_state, watermark_full_mask; "
        "speculative.dspark_components.dspark_draft.draft_markov_block is absent; "
        "speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode lacks kv_loc_plan; "
        "speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill lacks kv_loc_plan "
        "(sglang.srt.*, engines/sglang/hooks.py); the plugin runs on SGLang 0.5.22, 0.5.23")
    with pytest.raises(EngineRefused, match="initialize_model_parallel takes tensor_model_parallel_size, "
                                            "expert_model_parallel_size, .*; distributed\\.parallel_state\\."
                                            "init_model_parallel_group "
                                            "lacks use_mscclpp and takes use_mscclpp_allreduce;"):
        check_version("sglang", "0.5.20+cpu")


def test_startup_check_names_rank_and_every_difference(monkeypatch):
    monkeypatch.setenv("SPECPLAN_PLAN", str(PLAN))
    active = activate("sglang", "0.5.23")
    with pytest.raises(EngineRefused) as err:
        startup_check(active, {"attn_tp": [[0, 1, 2, 3]]}, {"num_steps": 3}, rank=2)
    assert str(err.value) == (f"specplan: rank 2: the sglang deployment is not plan 'dspark-greedy-dpattn' "
                              f"(SPECPLAN_PLAN={PLAN}): attn_tp: engine [0..3], plan [2,3]; "
                              f"num_steps: engine 3, plan 5")
    startup_check(active, {"attn_tp": [[0, 1], [2, 3]]}, {"num_steps": 5}, rank=2)


def test_activation_and_compare_import_no_torch():
    code = ("import os, sys; from specplan.plugins import activate, compare; "
            "a = activate('sglang', '0.5.23'); compare(a.plan, {'tp': [[0, 1, 2, 3]]}, {}); "
            "print('torch' in sys.modules)")
    env = dict(os.environ, SPECPLAN_PLAN=str(PLAN))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sglang_refuses_a_pipeline_plan_before_it_can_hang(monkeypatch, tmp_path):
    """Under SGLang PP only the last stage runs the hooked sites: a replica-wide converge
    (`pipeline.relay: broadcast`) would wait for earlier stages forever, so the plugin refuses
    such a plan at registration. SGLang's default plan relays ring: its converges stay on the
    last stage and its relays ride SGLang's messages, so it is accepted."""
    from specplan.lower import write_plan
    from specplan import compile
    from specplan.plugins.sglang import refuse_stage_spanning_sites
    from specplan.schema.load import load_spec_text

    def active_for(name: str, topology: str, extra: str = ""):
        spec = load_spec_text(f"name: {name}\nengine: sglang\ntopology: {topology}\n"
                              "model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}\n"
                              f"speculative: {{method: eagle, num_steps: 3}}\n{extra}", "s.yaml")
        path = write_plan(compile(spec), tmp_path / name)
        monkeypatch.setenv("SPECPLAN_PLAN", str(path))
        monkeypatch.setattr(common, "_ACTIVE", {})
        return activate("sglang", "0.5.23")

    refuse_stage_spanning_sites(active_for("sg-tp2", "{tp: 2, device: cpu}"))  # pp 1: nothing to refuse
    ring = active_for("sg-tp2pp2", "{tp: 2, pp: 2, device: cpu}")
    assert {r.mode for r in ring.plan.relays} == {"ring"}  # SGLang's default under PP
    refuse_stage_spanning_sites(ring)
    with pytest.raises(EngineRefused) as err:
        refuse_stage_spanning_sites(active_for("sg-bcast", "{tp: 2, pp: 2, device: cpu}",
                                               "pipeline: {relay: broadcast}\n"))
    text = str(err.value)
    assert "plan 'sg-bcast' has pp 2" in text and "pipeline.relay: ring" in text
    assert "eagle_accept" in text and "would hang" in text and "\n" not in text
