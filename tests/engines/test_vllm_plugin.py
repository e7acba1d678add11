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


def run(world: int, tp: int, pp: int, dp: int = 1, *, plan: Path | None, spec: str = SPEC):
    # CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton without an active driver (the interpreter runs it).
    env = {"SPECPLAN_PLAN": str(plan or ""), "VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    return launch(world, "step", str(engine_root("vllm")), tp, pp, dp, spec, module="vllm_workers",
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
    assert len(out[0]["hooks"]) == 5 and out[0]["calls"] == {"converge:eagle3_accept": 1}
    assert set(out[0]["startup_s"]) == {"check", "bind"}


def _pp_checks(out: list[dict], source: int, members: range) -> None:
    src = out[source]
    for r in members:
        o = out[r]
        if "final" in o:  # last stage
            assert o["final"] == src["local"], r
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
