"""Batch identity inside the engines: the plugins hand the runtime the engine's own request ids
and row generations on every call, so two ranks whose batches differ by one generation (a
reused row) stop with BatchMismatch naming the row, and agreeing batches pass.

SGLang 0.5.23 (tests/engines/sglang_identity_workers.py): a real ReqToTokenPool hands the rows
out; rank 1 gives row 1 back and takes it again (its generation bumps on rank 1 only).
vLLM 0.32.0 and 0.33.0 (tests/engines/vllm_workers.py `reuse`): under PP, vLLM's own PPHandler counter
(`on_req_idx_freed` on the last stage only); at pp 1 the plugin's counter, after rank 0 held
another request in the state index request 3 takes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_harness import forkserver
from test_sglang_plugin import widths
from test_sglang_sites import ENGINE, plan as sites_plan
from test_vllm_plugin import fatal, ok, plan_for, run as vllm_run, version  # noqa: F401
from wheels import engine_root

from tests.ranks import launch

HERE = Path(__file__).resolve().parent


pytestmark = pytest.mark.engines

SITE = {"eagle3": "eagle3_accept", "dspark": "dspark_accept_sample", "dflash": "dflash_accept_sample"}


def sglang(tmp: Path, method: str, reuse: bool) -> list[dict]:
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false", "TRITON_INTERPRET": "1",
           "SPECPLAN_PLAN": str(sites_plan(tmp, method, "tp2"))}
    root = engine_root("sglang")
    results = launch(2, "identity", str(root), json.dumps(widths(tp=2)),
                     json.dumps(ENGINE[method]), method, "1" if reuse else "0",
                     module="sglang_identity_workers", preload=forkserver(root), path=(HERE,),
                     env=env, timeout=600)
    for r in results:
        assert r.returncode == 0 and r.result is not None, (r.rank, r.stdout[-800:], r.stderr[-3000:])
    return [r.result["rounds"] for r in results]


@pytest.mark.parametrize("method", ["eagle3", "dspark", "dflash"])
def test_sglang_reused_row_on_one_rank_raises_batch_mismatch_naming_it(tmp_path, method):
    rank0, rank1 = sglang(tmp_path, method, reuse=True)
    assert "mismatch" not in rank0[0] and "mismatch" not in rank1[0]  # round 0: the same rows
    assert rank1[1]["generations"] == [rank0[1]["generations"][0], rank0[1]["generations"][1] + 1,
                                       *rank0[1]["generations"][2:]]
    err = rank1[1]["mismatch"]
    gen = rank0[1]["generations"][1]
    assert err.startswith(f"batch mismatch at site {SITE[method]} "), err
    assert (f"round 1: row 1: rank 1 holds request req-1 gen {gen + 1} where rank 0 (the source) "
            f"holds request req-1 gen {gen}; the ranks of group replica disagree") in err, err
    assert "mismatch" not in rank0[1]  # the source sent; the receiver compares


@pytest.mark.parametrize("method", ["eagle3", "dspark", "dflash"])
def test_sglang_agreeing_rows_pass_and_converge(tmp_path, method):
    rank0, rank1 = sglang(tmp_path, method, reuse=False)
    assert len(rank0) == len(rank1) == 3
    assert all("mismatch" not in r for r in rank0 + rank1)
    assert rank0 == rank1  # every round, rank 1 ends with its source's values (and the same rows)


def vllm(tmp: Path, world: int, tp: int, pp: int, topology: str, reuse: bool, extra: str = "",
         version: str | None = None):
    plan = plan_for(tmp, f"bi{tp}x{pp}", topology, extra)
    return vllm_run(world, tp, pp, plan=plan, fault="reuse" if reuse else "", worker="reuse",
                    version=version)


VLLM_PP2 = [pytest.param("", id="relay-broadcast"), pytest.param("pipeline: {relay: column}\n", id="relay-column")]


@pytest.mark.parametrize("extra", VLLM_PP2)
def test_vllm_pp2_generation_bumped_on_one_stage_ends_the_earlier_stage(version, tmp_path, extra):
    # The last stage (rank 1, the source) freed state index 1 (vLLM's on_req_idx_freed) where
    # stage 0 did not: request req-1 keeps row 1, its generation differs by one. Stage 0's
    # receive hook raises BatchMismatch, which ends that worker (exit 3, vllm_guard.py).
    results = vllm(tmp_path, 2, 1, 2, "{tp: 1, pp: 2, device: cpu}", reuse=True, extra=extra,
                   version=version)
    ok(results[1:])
    err = fatal(results[0], 3)
    assert err.startswith("specplan: rank 0: BatchMismatch: batch mismatch at site eagle3_accept "), err
    assert ("(relay " if extra else "(boundary ") in err, err  # column: the relay; else the converge
    assert ("round 0: row 1: rank 0 holds request req-1 gen 0 where rank 1 (the source) holds "
            "request req-1 gen 1;") in err, err
    assert err.endswith("(in the plugin's hook of vllm.v1.worker.gpu.pp_utils.PPHandler.receive); "
                        "ending this process (exit 3): vLLM reports a worker's exception only from "
                        "its output rank"), err


@pytest.mark.parametrize("extra", VLLM_PP2)
def test_vllm_pp2_agreeing_rows_pass(version, tmp_path, extra):
    out = ok(vllm(tmp_path, 2, 1, 2, "{tp: 1, pp: 2, device: cpu}", reuse=False, extra=extra,
                  version=version))
    assert all("peer_gone" not in o for o in out)
    assert out[0]["received"]["sampled"] == out[1]["final"]["sampled"]


def test_vllm_pp1_row_reused_on_one_rank_only_ends_that_rank(version, tmp_path):
    # Step 0: rank 0 holds req-1 in state index 1, rank 1 in index 5 (same requests, gen 0).
    # Step 1: req-3 takes index 1 on both: a reuse on rank 0 (gen 1), a first use on rank 1.
    results = vllm(tmp_path, 2, 2, 1, "{tp: 2, device: cpu}", reuse=True, version=version)
    assert len(ok(results[:1])[0]["steps"]) == 2  # the source converged both steps
    err = fatal(results[1], 3)
    assert err.startswith("specplan: rank 1: BatchMismatch: batch mismatch at site eagle3_accept "), err
    assert ("round 1: row 1: rank 1 holds request req-3 gen 0 where rank 0 (the source) holds "
            "request req-3 gen 1;") in err, err
    assert "(in the plugin's hook of vllm.v1.worker.gpu.spec_decode.rejection_sampler.RejectionSampler.__call__)" in err


def test_vllm_pp1_agreeing_rows_pass(version, tmp_path):
    out = ok(vllm(tmp_path, 2, 2, 1, "{tp: 2, device: cpu}", reuse=False, version=version))
    assert out[0]["steps"] == out[1]["steps"] and len(out[0]["steps"]) == 2
