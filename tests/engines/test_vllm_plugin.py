"""The vLLM plugin against vLLM 0.33.0's real code, on gloo ranks (tests/engines/vllm_workers.py).

Every run loads the plugin through `vllm.plugins.load_general_plugins` (the entry point of the
editable install), builds the groups with vLLM's own initialize_model_parallel and runs one
step of vLLM's V2 RejectionSampler (Triton kernels, interpreted) and PPHandler on every rank.
Ranks draw different coins, so the accepted tokens differ unless the plugin converges them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "runtime"))

from launch import compile_spec, launch  # noqa: E402
from wheels import engine_root  # noqa: E402

pytestmark = pytest.mark.engines
REFUSED = 4
SPEC = json.dumps({"method": "eagle3", "num_speculative_tokens": 3})


def plan_for(tmp: Path, name: str, topology: str, extra: str = "") -> Path:
    return compile_spec(tmp / name, f"""
name: v-{name}
engine: vllm
topology: {topology}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: eagle3, num_steps: 3, sampling: sampling}}
{extra}runtime: {{max_batch: 8, timeout_s: 300}}
""")


def run(world: int, tp: int, pp: int, dp: int = 1, *, plan: Path | None, spec: str = SPEC,
        fault: str = "", hot_path: str = "auto", worker: str = "step"):
    # CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton without an active driver (the interpreter runs it).
    env = {"SPECPLAN_PLAN": str(plan or ""), "VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": "", "SPECPLAN_HOT_PATH": hot_path}
    return launch(world, worker, str(engine_root("vllm")), tp, pp, dp, spec, fault, module="vllm_workers",
                  path=(HERE,), env=env, timeout=900)


def ok(results) -> list[dict]:
    for r in results:
        assert r.returncode == 0, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return [r.result for r in results]


def refusals(results) -> list[str]:
    for r in results:
        assert r.returncode == REFUSED, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return [next(l for l in r.stdout.splitlines() if l.startswith("REFUSED ")) for r in results]


def test_unset_installs_nothing_and_ranks_accept_different_tokens():
    out = ok(run(2, 2, 1, plan=None))
    assert [o["hooks"] for o in out] == [[], []]
    assert out[0]["final"] == out[0]["local"] and out[1]["final"] == out[1]["local"]
    assert out[0]["local"]["sampled"] != out[1]["local"]["sampled"]  # the coins decide


def test_tp2_every_rank_ends_with_the_source_accept(tmp_path):
    out = ok(run(2, 2, 1, plan=plan_for(tmp_path, "tp2", "{tp: 2, device: cpu}")))
    assert out[0]["local"] != out[1]["local"]  # the engine alone would split the ranks
    assert out[0]["final"] == out[1]["final"] == out[0]["local"]
    assert out[0]["drafts"] != out[1]["drafts"]  # each rank's speculator proposes its own
    assert out[0]["kept"] == out[1]["kept"] == out[0]["drafts"]  # vLLM's draft state: the source's
    assert len(out[0]["hooks"]) == 8
    assert out[0]["calls"] == {"converge:eagle3_accept": 1, "converge:eagle3_draft": 1}
    assert set(out[0]["startup_s"]) == {"check", "bind"}


def test_device_path_forged_header_raises_at_the_steps_get_output(tmp_path):
    """Device path (forced on CPU ranks): the receiver's converge records the mismatch without a
    host read; vLLM's AsyncOutput.get_output, where it waits for the step, raises it."""
    plan = plan_for(tmp_path, "tp2d", "{tp: 2, device: cpu}")
    results = run(2, 2, 1, plan=plan, fault="stale:0", hot_path="device")
    out = ok(results)
    assert "desync" not in out[0]  # the source sent; nothing recorded there
    err, at = out[1]["desync"], out[1]["at"]
    assert at == "AsyncOutput.get_output"
    assert err.startswith("DesyncError: desync at site eagle3_accept"), err
    assert "round 0" in err and "round 1" in err and err.endswith("read at check_round)")
    healthy = ok(run(2, 2, 1, plan=plan, hot_path="device"))
    assert all("desync" not in o for o in healthy) and healthy[0]["final"] == healthy[1]["final"]


def _pp_checks(out: list[dict], source: int, members: range) -> None:
    src = out[source]
    for r in members:
        o = out[r]
        if "final" in o:  # last stage: the source's accept, and its drafts in vLLM's draft state
            assert o["final"] == src["local"], r
            assert o["kept"] == src["drafts"], r
        else:
            got = o["received"]
            assert got["sampled"] == src["local"]["sampled"], r
            assert got["num_sampled"] == src["local"]["num_sampled"], r
            assert got["num_rejected"] == src["local"]["num_rejected"], r
            assert got["drafts"] == src["drafts"], r


def test_pp2_broadcast_plan_earlier_stages_join_the_replica_converge(tmp_path):
    out = ok(run(4, 2, 2, plan=plan_for(tmp_path, "pp2", "{tp: 2, pp: 2, device: cpu}")))
    assert out[2]["local"] != out[3]["local"]
    _pp_checks(out, 2, range(4))
    assert out[0]["calls"] == {"converge:eagle3_accept": 1, "converge:eagle3_draft": 1}


def test_pp2_column_plan_relays_through_rt_relay(tmp_path):
    plan = plan_for(tmp_path, "pp2col", "{tp: 2, pp: 2, device: cpu}", "pipeline: {relay: column}\n")
    out = ok(run(4, 2, 2, plan=plan))
    _pp_checks(out, 2, range(4))
    assert out[0]["calls"] == {"relay:eagle3_accept": 1, "relay:eagle3_draft": 1}
    assert out[2]["calls"] == {"converge:eagle3_accept": 1, "relay:eagle3_accept": 1,
                               "converge:eagle3_draft": 1, "relay:eagle3_draft": 1}


def test_tp2_pp2_dp2_each_replica_from_its_own_source(tmp_path):
    out = ok(run(8, 2, 2, 2, plan=plan_for(tmp_path, "dp2", "{tp: 2, pp: 2, dp: 2, device: cpu}")))
    _pp_checks(out, 2, range(4))
    _pp_checks(out, 6, range(4, 8))
    assert out[2]["local"] != out[6]["local"]


def test_plan_of_another_topology_is_refused_naming_family_rank_and_values(tmp_path):
    lines = refusals(run(2, 1, 2, plan=plan_for(tmp_path, "tp2r", "{tp: 2, device: cpu}")))
    assert "rank 0: the vllm deployment is not plan 'v-tp2r'" in lines[0]
    assert "tp: engine [0], plan [0,1]" in lines[0] and "pp: engine [0,1], plan [0]" in lines[0]
    assert "rank 1:" in lines[1] and "tp: engine [1], plan [0,1]" in lines[1]


def test_other_speculative_settings_are_refused(tmp_path):
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
    lines = refusals(run(2, 2, 1, plan=plan_for(tmp_path, "tp2s", "{tp: 2, device: cpu}"), spec=spec))
    assert "method: engine mtp, plan eagle3" in lines[0] and "num_steps: engine 2, plan 3" in lines[0]


def test_device_path_pp2_each_stage_raises_a_forged_header_at_its_step_check(tmp_path):
    """pp 2, relay broadcast: the source (rank 2) runs one accept round ahead. Its stage peer
    raises at AsyncOutput.get_output; stage 0, which joined the same converge, at its next
    PPHandler.receive (from the flag copy its previous receive left)."""
    plan = plan_for(tmp_path, "pp2d", "{tp: 2, pp: 2, device: cpu}")
    out = ok(run(4, 2, 2, plan=plan, fault="stale:2", hot_path="device"))
    assert "desync" not in out[2]
    assert out[3]["at"] == "AsyncOutput.get_output"
    for o in (out[0], out[1], out[3]):
        assert o["desync"].startswith("DesyncError: desync at site eagle3_accept"), o["desync"]
        assert "round 0" in o["desync"] and o["desync"].endswith("read at check_round)")
    assert out[0]["at"] == out[1]["at"] == "PPHandler.receive"
    healthy = ok(run(4, 2, 2, plan=plan, hot_path="device"))
    assert all("desync" not in o for o in healthy)
    _pp_checks(healthy, 2, range(4))


def _method_plan(tmp: Path, method: str, topology: str) -> Path:
    return compile_spec(tmp / method, f"""
name: v-{method}
engine: vllm
topology: {topology}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: {method}, num_steps: 3, sampling: sampling}}
runtime: {{max_batch: 8, timeout_s: 300}}
""")


@pytest.mark.parametrize("method", ["dspark", "dflash"])
def test_dspark_and_dflash_accept_converge_as_count_and_bonus(tmp_path, method):
    """vLLM 0.33.0 runs both (V2 DSpark/DFlash speculators, the chain RejectionSampler); their
    plans name a count and a bonus: every rank ends with the source's tokens, decoded from
    the step's own drafts (input_ids), and keeps the source's drafts."""
    spec = json.dumps({"method": method, "num_speculative_tokens": 3})
    out = ok(run(2, 2, 1, plan=_method_plan(tmp_path, method, "{tp: 2, device: cpu}"), spec=spec))
    assert out[0]["local"] != out[1]["local"]
    assert out[0]["final"] == out[1]["final"] == out[0]["local"]
    assert out[0]["kept"] == out[1]["kept"] == out[0]["drafts"]
    assert out[1]["calls"] == {f"converge:{method}_accept_sample": 1, f"converge:{method}_draft": 1}


def test_dflash_pp2_earlier_stages_decode_the_source_accept(tmp_path):
    spec = json.dumps({"method": "dflash", "num_speculative_tokens": 3})
    plan = _method_plan(tmp_path, "dflash", "{tp: 2, pp: 2, device: cpu}")
    _pp_checks(ok(run(4, 2, 2, plan=plan, spec=spec)), 2, range(4))
