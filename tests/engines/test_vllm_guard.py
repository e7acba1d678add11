"""The vLLM plugin is never silently wrong, on vLLM 0.32.0's and 0.33.0's real functions
(tests/engines/vllm_guard_workers.py): every hook's target is checked against its release's
table at install, an exception in any hook ends the process, and the seed's two silent
corruptions (a stale pipeline entry written into a reused row; the broadcast ending early) are
caught at run time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan.engines.vllm.hooks import release_for
from test_vllm_plugin import fatal, ok, plan_for, refusals, run, version  # noqa: F401
from wheels import PLUGIN_RELEASES

pytestmark = pytest.mark.engines
HOOKED = {v: [h for h in release_for(v).hooks if h.wrapped] for v in PLUGIN_RELEASES["vllm"]}


def body(hook) -> str:
    """The plugin's method serving `hook` (its `@serves` declaration)."""
    from specplan.plugins.roles import body_for
    from specplan.plugins.vllm import VllmState

    return body_for(VllmState, hook)


def guard(version: str, tmp: Path, worker: str, topology: str = "{tp: 1, pp: 2, device: cpu}",
          tp: int = 1, pp: int = 2, fault: str = "", env: dict | None = None):
    plan = plan_for(tmp, worker, topology)
    return run(tp * pp, tp, pp, version=version, plan=plan, fault=fault, worker=worker,
               env=env, module="vllm_guard_workers")


def test_every_hook_ends_the_process_on_an_exception_of_its_own(version, tmp_path):
    out = ok(guard(version, tmp_path, "forced_exceptions", "{tp: 1, device: cpu}", pp=1))[0]
    engine_error = out.pop("engine_error")
    assert sorted(out) == sorted(h.target for h in HOOKED[version])
    for target, got in out.items():
        assert got["exited"] == 1, (target, got)
        line = got["line"]
        assert line.startswith("specplan: rank 0: RuntimeError: forced in "), line
        assert f"(in the plugin's hook of {target}); ending this process (exit 1)" in line, line
    # vLLM's own exception inside a wrapper is vLLM's: it passes through, nothing ends.
    assert engine_error.startswith("AttributeError: "), engine_error


def test_every_target_refuses_a_signature_other_than_its_tables(version, tmp_path):
    out = ok(guard(version, tmp_path, "forced_mismatches", "{tp: 1, device: cpu}", pp=1))[0]
    table = release_for(version)
    missing = out.pop("missing")
    assert sorted(out) == sorted(h.target for h in table.hooks)
    for hook in table.hooks:
        assert out[hook.target] == (
            f"specplan: vllm {version}: {hook.target}{hook.signature} differs from "
            f"{hook.target}(self, other) in the plugin's table for vLLM {table.version}; the "
            "plugin does not run on it")
    assert missing.startswith(f"specplan: vllm {version}: vllm.v1.worker.gpu.pp_utils has no "
                              "PPHandler.gone; the plugin's table for vLLM "), missing


OTHER = {"0.33.0": "0.32.0", "0.30.0": "0.32.0"}  # else the next newer table (0.31.x has 0.30.x's signatures)


def first_difference(version: str, other: str) -> tuple[str, str, str]:
    """(target, this wheel's signature, the other table's) of the first hook, in the other
    table's order, whose signatures differ: where a start under that table is refused."""
    mine = {h.qualname: h for h in release_for(version).hooks}
    for h in release_for(other).hooks:
        if h.qualname in mine and mine[h.qualname].signature != h.signature:
            return h.target, mine[h.qualname].signature, h.signature
    raise AssertionError(f"{version} and {other} agree")


def newer(version: str) -> str:
    releases = PLUGIN_RELEASES["vllm"]
    return OTHER.get(version) or releases[releases.index(version) + 1]


def test_the_other_releases_table_refuses_the_start_in_one_line(version, tmp_path):
    """vLLM 0.32's PPHandler.receive under hooks written for 0.33.0 (the trial's silent run);
    0.31's RejectionSampler.__call__ (no invalid_drafts) under 0.32's."""
    lines = refusals(guard(version, tmp_path, "table", fault=newer(version)))
    other = release_for(newer(version)).version
    target, mine, theirs = first_difference(version, newer(version))
    assert lines[0] == lines[1] == (
        f"REFUSED specplan: vllm {version}: {target}{mine} differs from "
        f"{target}{theirs} in the plugin's table for vLLM {other}; the plugin "
        "does not run on it")


def test_untested_version_runs_on_the_nearest_table_and_still_refuses_a_mismatch(version, tmp_path):
    allow = {"SPECPLAN_ALLOW_UNTESTED_ENGINE": "1"}
    as_new = guard(version, tmp_path, "table", fault="as:0.34.0", env=allow)
    if version == "0.33.0":  # 0.34.0 reads 0.33.0's table, whose signatures it has
        assert [o["release"] for o in ok(as_new)] == ["0.33.0", "0.33.0"]
    else:
        target, mine, _ = first_difference(version, "0.33.0")
        assert f"{target}{mine} differs from" in refusals(as_new)[0]
    assert "vllm 0.34.0 is not a supported engine version" in \
        refusals(guard(version, tmp_path, "table", fault="as:0.34.0"))[0]


def test_the_version_comes_from_the_distribution_providing_vllm(version, tmp_path):
    out = ok(guard(version, tmp_path, "table", fault=version))
    assert [o["version"] for o in out] == [version, version]
    assert out[0]["release"] == release_for(version).version


def test_an_exception_in_a_hook_ends_every_rank_of_a_real_pp_step(version, tmp_path):
    """Stage 0's receive raises (as the trial's TypeError did, 32 times, dropped by vLLM): stage
    0 ends at once (exit 1); the last stage, whose converge it never joined, ends as well."""
    serves = body(release_for(version).hook("pp_receive"))
    results = guard(version, tmp_path, "raise_in", fault=serves)
    line = fatal(results[0], 1)
    assert line.startswith(f"specplan: rank 0: RuntimeError: forced in {serves} on rank 0 "
                           "(in the plugin's hook of vllm.v1.worker.gpu.pp_utils.PPHandler.receive)"), line
    assert results[1].returncode != 0 and results[1].result is None, results[1].stdout


def test_a_stale_entry_written_into_a_reused_row_ends_the_earlier_stage(version, tmp_path):
    healthy = ok(guard(version, tmp_path, "entry"))
    assert healthy[0]["consumed"] == [0, -1, 2]  # vLLM's own filter drops the freed row 1
    if body(release_for(version).hook("pp_prev_outputs")) == "pp_prev_outputs_table":
        # 0.30 - 0.32 write the drafts themselves: row 1's state keeps its own
        assert healthy[0]["table"][1] == [7] * 3 and healthy[0]["table"][0] != [7] * 3
    results = guard(version, tmp_path, "entry", fault="stale-write")
    line = fatal(results[0], 3)
    assert line.startswith("specplan: rank 0: StaleEntry: stale pipeline entry of round 0: row 1: "
                           "state index 1 held request req-1 gen 0 at receive, gen 1 now"), line
    assert "PPHandler.get_prev_sampled_outputs)" in line
    assert results[1].returncode == 0


def test_a_request_going_on_after_the_broadcast_left_it_out_ends_the_last_stage(version, tmp_path):
    healthy = ok(guard(version, tmp_path, "early_stop"))
    assert [s["received"] for s in healthy[0]["steps"]] == [s["sampled"] for s in healthy[1]["steps"]]
    results = guard(version, tmp_path, "early_stop", fault="early-stop")
    line = fatal(results[1], 3)
    assert line.startswith("specplan: rank 1: BroadcastEndedEarly: broadcast ended early at round 1: "
                           "row 0, request req-0 decodes at step 2 after step 1 sampled it outside "
                           "the sampled-rows mask"), line
    assert "PPHandler.broadcast)" in line
    assert results[0].returncode != 0 and results[0].result is None
