"""The vLLM plugin against vLLM 0.30.0's to 0.33.0's real code, on gloo ranks
(tests/engines/vllm_workers.py); every test runs on each plugin release's wheel (`version`;
all but the newest under the `versions` marker, tests/engines/conftest.py).

Every run loads the plugin through `vllm.plugins.load_general_plugins` (the entry point of the
editable install), builds the groups with vLLM's own initialize_model_parallel and runs one
step of vLLM's V2 RejectionSampler (Triton kernels, interpreted) and PPHandler on every rank.
Ranks draw different coins, so the accepted tokens differ unless the plugin converges them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_harness import forkserver
from wheels import PLUGIN_RELEASES, engine_root

from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines
REFUSED = 4
FATAL = "specplan: rank "  # the one line a hook's exception prints before the process ends


# Releases whose V2 sampler the Triton interpreter cannot run, so only the plugin's install
# (its table against the wheel's real signatures) is tested there, not a step.
NO_INTERPRETED_SAMPLER = {
    "0.30.0": "vLLM 0.30.0's Gumbel noise (v1/worker/gpu/sample/gumbel.py) calls "
              "triton.language.extra.libdevice.log1p, which TRITON_INTERPRET evaluates to None: "
              "its RejectionSampler cannot run on a CPU"}
NO_SAMPLER_WORKERS = ("forced_exceptions", "forced_mismatches", "table", "raise_in")


@pytest.fixture(params=PLUGIN_RELEASES["vllm"])
def version(request) -> str:
    return request.param
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
        fault: str = "", hot_path: str = "auto", worker: str = "step", version: str | None = None,
        env: dict | None = None, module: str = "vllm_workers"):
    # CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton without an active driver (the interpreter runs it).
    env = {"SPECPLAN_PLAN": str(plan or ""), "VLLM_USE_V2_MODEL_RUNNER": "1", "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": "", "SPECPLAN_HOT_PATH": hot_path, **(env or {})}
    if version in NO_INTERPRETED_SAMPLER and worker not in NO_SAMPLER_WORKERS:
        pytest.skip(NO_INTERPRETED_SAMPLER[version])
    root = engine_root("vllm", version)
    return launch(world, worker, str(root), tp, pp, dp, spec, fault,
                  module=module, preload=forkserver(root), path=(HERE,), env=env, timeout=900)


def ok(results) -> list[dict]:
    for r in results:
        assert r.returncode == 0, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return [r.result for r in results]


def fatal(result, code: int) -> str:
    """The line a rank printed when a hook's exception ended it with exit `code`."""
    assert result.returncode == code, f"rank {result.rank} exited {result.returncode}:\n{result.stdout}\n{result.stderr[-3000:]}"
    lines = [l for l in result.stderr.splitlines() if l.startswith(FATAL)]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


def refusals(results) -> list[str]:
    for r in results:
        assert r.returncode == REFUSED, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return [next(l for l in r.stdout.splitlines() if l.startswith("REFUSED ")) for r in results]


def test_unset_installs_nothing_and_ranks_accept_different_tokens(version):
    out = ok(run(2, 2, 1, version=version, plan=None))
    assert [o["hooks"] for o in out] == [[], []]
    assert out[0]["final"] == out[0]["local"] and out[1]["final"] == out[1]["local"]
    assert out[0]["local"]["sampled"] != out[1]["local"]["sampled"]  # the coins decide


def test_tp2_every_rank_ends_with_the_source_accept(version, tmp_path):
    out = ok(run(2, 2, 1, version=version, plan=plan_for(tmp_path, "tp2", "{tp: 2, device: cpu}")))
    assert out[0]["local"] != out[1]["local"]  # the engine alone would split the ranks
    assert out[0]["final"] == out[1]["final"] == out[0]["local"]
    assert out[0]["drafts"] != out[1]["drafts"]  # each rank's speculator proposes its own
    assert out[0]["kept"] == out[1]["kept"] == out[0]["drafts"]  # vLLM's draft state: the source's
    assert len(out[0]["hooks"]) == 11  # engines/vllm/hooks.py: every table entry with a hook but propose
    assert out[0]["calls"] == {"converge:eagle3_accept": 1, "converge:eagle3_draft": 1}
    assert set(out[0]["startup_s"]) == {"check", "bind"}


def test_device_path_forged_header_ends_the_rank_at_the_steps_get_output(version, tmp_path):
    """Device path (forced on CPU ranks): the receiver's converge records the mismatch without a
    host read; vLLM's AsyncOutput.get_output, where it waits for the step, raises it, and the
    hook's guard ends that worker (exit 3) rather than let vLLM drop a non-output rank's error."""
    plan = plan_for(tmp_path, "tp2d", "{tp: 2, device: cpu}")
    results = run(2, 2, 1, version=version, plan=plan, fault="stale:0", hot_path="device")
    assert "desync" not in ok(results[:1])[0]  # the source sent; nothing recorded there
    line = fatal(results[1], 3)
    assert line.startswith("specplan: rank 1: DesyncError: desync at site eagle3_accept"), line
    assert "round 0" in line and "round 1" in line and "read at check_round)" in line
    assert "(in the plugin's hook of vllm.v1.worker.gpu.async_utils.AsyncOutput.get_output)" in line
    healthy = ok(run(2, 2, 1, version=version, plan=plan, hot_path="device"))
    assert healthy[0]["final"] == healthy[1]["final"]


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


def test_pp2_broadcast_plan_earlier_stages_join_the_replica_converge(version, tmp_path):
    out = ok(run(4, 2, 2, version=version, plan=plan_for(tmp_path, "pp2", "{tp: 2, pp: 2, device: cpu}")))
    assert out[2]["local"] != out[3]["local"]
    _pp_checks(out, 2, range(4))
    assert out[0]["calls"] == {"converge:eagle3_accept": 1, "converge:eagle3_draft": 1}


def test_pp2_column_plan_relays_through_rt_relay(version, tmp_path):
    plan = plan_for(tmp_path, "pp2col", "{tp: 2, pp: 2, device: cpu}", "pipeline: {relay: column}\n")
    out = ok(run(4, 2, 2, version=version, plan=plan))
    _pp_checks(out, 2, range(4))
    assert out[0]["calls"] == {"relay:eagle3_accept": 1, "relay:eagle3_draft": 1}
    assert out[2]["calls"] == {"converge:eagle3_accept": 1, "relay:eagle3_accept": 1,
                               "converge:eagle3_draft": 1, "relay:eagle3_draft": 1}


def test_tp2_pp2_dp2_each_replica_from_its_own_source(version, tmp_path):
    out = ok(run(8, 2, 2, 2, version=version, plan=plan_for(tmp_path, "dp2", "{tp: 2, pp: 2, dp: 2, device: cpu}")))
    _pp_checks(out, 2, range(4))
    _pp_checks(out, 6, range(4, 8))
    assert out[2]["local"] != out[6]["local"]


def test_plan_of_another_topology_is_refused_naming_family_rank_and_values(version, tmp_path):
    lines = refusals(run(2, 1, 2, version=version, plan=plan_for(tmp_path, "tp2r", "{tp: 2, device: cpu}")))
    assert "rank 0: the vllm deployment is not plan 'v-tp2r'" in lines[0]
    assert "tp: engine [0], plan [0,1]" in lines[0] and "pp: engine [0,1], plan [0]" in lines[0]
    assert "rank 1:" in lines[1] and "tp: engine [1], plan [0,1]" in lines[1]


def test_other_speculative_settings_are_refused(version, tmp_path):
    spec = json.dumps({"method": "mtp", "num_speculative_tokens": 2})
    lines = refusals(run(2, 2, 1, version=version, plan=plan_for(tmp_path, "tp2s", "{tp: 2, device: cpu}"), spec=spec))
    assert "method: engine mtp, plan eagle3" in lines[0] and "num_steps: engine 2, plan 3" in lines[0]


def test_device_path_pp2_each_stage_ends_at_its_step_check(version, tmp_path):
    """pp 2, relay broadcast: the source (rank 2) runs one accept round ahead. Its stage peer
    ends at AsyncOutput.get_output; stage 0, which joined the same converge, at its next
    PPHandler.receive (0.33.0, from the flag copy its previous receive left) or in the drafts'
    receive its dead peer never answers (0.32, which receives drafts on every sampled step):
    every rank but the source exits non-zero, none with tokens of its own."""
    plan = plan_for(tmp_path, "pp2d", "{tp: 2, pp: 2, device: cpu}")
    results = run(4, 2, 2, version=version, plan=plan, fault="stale:2", hot_path="device")
    assert results[2].returncode == 0
    line = fatal(results[3], 3)
    assert line.startswith("specplan: rank 3: DesyncError: desync at site eagle3_accept"), line
    assert "AsyncOutput.get_output)" in line
    for r in (0, 1):
        line = fatal(results[r], 3)
        assert line.startswith(f"specplan: rank {r}: "), line
        assert "(in the plugin's hook of vllm.v1.worker.gpu.pp_utils.PPHandler.receive)" in line, line
        if version == "0.33.0":
            assert "DesyncError: desync at site eagle3_accept" in line and "round 0" in line, line
    healthy = ok(run(4, 2, 2, version=version, plan=plan, hot_path="device"))
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
def test_dspark_and_dflash_accept_converge_as_count_and_bonus(version, tmp_path, method):
    """vLLM 0.33.0 runs both (V2 DSpark/DFlash speculators, the chain RejectionSampler); their
    plans name a count and a bonus: every rank ends with the source's tokens, decoded from
    the step's own drafts (input_ids), and keeps the source's drafts."""
    spec = json.dumps({"method": method, "num_speculative_tokens": 3})
    out = ok(run(2, 2, 1, version=version, plan=_method_plan(tmp_path, method, "{tp: 2, device: cpu}"), spec=spec))
    assert out[0]["local"] != out[1]["local"]
    assert out[0]["final"] == out[1]["final"] == out[0]["local"]
    assert out[0]["kept"] == out[1]["kept"] == out[0]["drafts"]
    assert out[1]["calls"] == {f"converge:{method}_accept_sample": 1, f"converge:{method}_draft": 1}


def test_dflash_pp2_earlier_stages_decode_the_source_accept(version, tmp_path):
    spec = json.dumps({"method": "dflash", "num_speculative_tokens": 3})
    plan = _method_plan(tmp_path, "dflash", "{tp: 2, pp: 2, device: cpu}")
    _pp_checks(ok(run(4, 2, 2, version=version, plan=plan, spec=spec)), 2, range(4))


def test_ngram_plan_loads_and_converges_its_chain(version, tmp_path):
    """vLLM's ngram drafts a chain (no tree mask): its plan passes the plugin's load and the
    start-up check, and every rank ends with the source's accept and drafts."""
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 3})
    out = ok(run(2, 2, 1, version=version, plan=_method_plan(tmp_path, "ngram", "{tp: 2, device: cpu}"),
                 spec=spec))
    assert out[0]["local"] != out[1]["local"]
    assert out[0]["final"] == out[1]["final"] == out[0]["local"]
    assert out[0]["kept"] == out[1]["kept"] == out[0]["drafts"]
    assert out[1]["calls"] == {"converge:ngram_accept": 1, "converge:ngram_draft": 1}
