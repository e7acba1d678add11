"""simulate runs what the spec says: a `behaviour: engine` spec simulates the engine's own plan
(its converges, groups and sources), and the report's first line names the behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]

# SGLang 0.5.23 EAGLE on CUDA, greedy: eagle_sample broadcasts nothing on this path.
SGLANG_EAGLE_CUDA_GREEDY = """
name: eagle-tp2-sglang-engine
engine: sglang
behaviour: engine
topology: {tp: 2}
model: {num_layers: 4, hidden_size: 4096, vocab_size: 128256}
speculative: {method: eagle, num_steps: 3, topk: 1, sampling: greedy}
runtime: {max_batch: 8}
"""


def test_noise_fails_the_sglang_cuda_greedy_eagle_engine_plan_naming_decision_round_ranks(tmp_path):
    spec = tmp_path / "engine.yaml"
    spec.write_text(SGLANG_EAGLE_CUDA_GREEDY)
    done = cli("simulate", str(spec), "--rounds", "3", "--inject", "noise")
    assert done.returncode == 3, done.stdout + done.stderr
    first, second = done.stdout.splitlines()[:2]
    assert "behaviour engine, policy sglang default" in first and "inject noise" in first
    assert second == ("the engine's own plan: 0 converge boundaries; unconverged: eagle_target, "
                      "eagle_draft_extend, eagle_draft, eagle_accept")
    out = " ".join(done.stdout.split())  # rich wraps long problem lines
    assert "ProbeMismatch: agreement probe: decision next_token_ids differs at round 0 within " \
           "replica [0, 1]" in out
    assert "ranks [0]: hash" in out and "ranks [1]: hash" in out


def test_an_engine_spec_check_calls_clean_passes_under_noise():
    spec = ROOT / "specs/engine/llama-3.2-1b-eagle3-pp2-vllm-engine.yaml"
    check = cli("check", spec)
    assert check.returncode == 0 and "WARN" not in check.stdout, check.stdout
    done = cli("simulate", str(spec), "--rounds", "3", "--inject", "noise")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "behaviour engine, policy vllm default" in done.stdout.splitlines()[0]
    assert "PASS" in done.stdout


def _spec(tmp_path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return str(path)


EAGLE_TP2 = """
name: eagle-tp2
engine: sglang
topology: {tp: 2}
model: {num_layers: 4, hidden_size: 4096, vocab_size: 128256}
speculative: {method: eagle, num_steps: 3, topk: 1, sampling: greedy}
"""
DSPARK_TP2 = """
name: dspark-tp2
engine: sglang
topology: {tp: 2}
model: {num_layers: 4, hidden_size: 4096, vocab_size: 128256}
speculative: {method: dspark, num_steps: 3, sampling: greedy}
"""


def test_draft_noise_fails_an_unconverged_draft_naming_it(tmp_path):
    spec = _spec(tmp_path, EAGLE_TP2 + 'sync: {sites: {eagle_draft: "off"}}\n')
    done = cli("simulate", spec, "--rounds", "3", "--inject", "draft-noise")
    assert done.returncode == 3, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "ProbeMismatch: agreement probe: decision draft_tokens differs at round 1" in out


def test_verify_noise_fails_sglangs_unconverged_dspark_verify_budget(tmp_path):
    # SGLang's SpecTpSync converges verify_lens (dspark_plan) but not the host verify budget.
    spec = _spec(tmp_path, DSPARK_TP2 + "behaviour: engine\n")
    done = cli("simulate", spec, "--rounds", "3", "--inject", "verify-noise")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "unconverged: dspark_plan_verify" in done.stdout
    assert "decision verify_budget differs at round 1" in " ".join(done.stdout.split())


DFLASH_TP2 = DSPARK_TP2.replace("dspark", "dflash")


@pytest.mark.slow
def test_verify_noise_fails_an_unconverged_dflash_verify_naming_it(tmp_path):
    spec = _spec(tmp_path, DFLASH_TP2 + 'sync: {sites: {dflash_accept_greedy: "off"}}\n')
    done = cli("simulate", spec, "--rounds", "3", "--inject", "verify-noise")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "decision target_predict differs at round 1" in " ".join(done.stdout.split())


@pytest.mark.slow
@pytest.mark.parametrize("text,inject", [(EAGLE_TP2, "draft-noise"), (DSPARK_TP2, "draft-noise"),
                                         (DSPARK_TP2, "verify-noise"), (DFLASH_TP2, "verify-noise")])
def test_a_safe_spec_passes_every_decision_fault(tmp_path, text, inject):
    done = cli("simulate", _spec(tmp_path, text), "--rounds", "3", "--inject", inject)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout and "token-identical" in done.stdout


def test_verify_noise_needs_a_verify_plan(tmp_path):
    done = cli("simulate", _spec(tmp_path, EAGLE_TP2), "--inject", "verify-noise")
    assert done.returncode == 2
    assert "--inject verify-noise perturbs the verify plans of dflash and dspark; method eagle has none" \
        in done.stderr


def test_taps_misrouted_on_a_middle_stage_lower_acceptance_silently(tmp_path):
    """The seed's pp > 2 case: valid tokens, a lower acceptance, and diff --acceptance says so."""
    import json

    from specplan.sim.matrix import spec_text

    spec = _spec(tmp_path, spec_text("pp3", "eagle3"))
    runs = {}
    for run, extra in (("A", ()), ("B", ("--inject", "tap-order"))):
        done = cli("simulate", spec, "--rounds", "8", "--trace-dir", str(tmp_path / run), "--json", *extra)
        assert done.returncode == 0, done.stdout + done.stderr  # the tokens stay valid
        runs[run] = report = json.loads(done.stdout)
        assert report["verdict"]["checked"] == 4 and report["trace_dir"] == str(tmp_path / run)
        assert set(report["acceptance"]["replicas"]) == {"0"}
        assert sorted(p.name for p in (tmp_path / run).iterdir()) == [f"rank{r}.jsonl" for r in range(3)]
    assert runs["B"]["acceptance"]["mean"] < runs["A"]["acceptance"]["mean"]
    diff = cli("diff", "--acceptance", tmp_path / "A", tmp_path / "B")
    assert diff.returncode == 3, diff.stdout + diff.stderr
    assert "acceptance drop: B falls short of A by" in diff.stdout
    again = cli("simulate", spec, "--rounds", "1", "--trace-dir", str(tmp_path / "A"))
    assert again.returncode == 2 and "--trace-dir already holds traces (rank0.jsonl" in again.stderr


def test_tap_order_needs_a_middle_stage(tmp_path):
    from specplan.sim.matrix import spec_text

    done = cli("simulate", _spec(tmp_path, spec_text("pp2", "eagle3")), "--inject", "tap-order")
    assert done.returncode == 2 and "it needs pp >= 3 (found 2)" in done.stderr


PP2_EAGLE_SAMPLED = """
name: pp2-eagle-sampled
engine: sglang
topology: {tp: 2, pp: 2, device: cpu}
model: {num_layers: 5, hidden_size: 64, vocab_size: 512}
speculative: {method: eagle, sampling: sampling, num_steps: 5, topk: 2, num_draft_tokens: 3}
"""


def test_drafts_never_relayed_fail_a_sampled_run_by_the_probe(tmp_path):
    """Found by the seeded sweep: stage 0 embeds placeholders for drafts it never received, but in
    3 sampled rounds no draft was accepted, so the tokens stayed right and the run passed. Every
    stage reads the drafts, so the probe compares them across stages."""
    spec = _spec(tmp_path, PP2_EAGLE_SAMPLED + "pipeline: {relay_drafts: false}\n")
    assert cli("check", spec).returncode == 3
    done = cli("simulate", spec, "--rounds", "3", "--requests", "2", "--allow-errors")
    assert done.returncode == 3, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "ProbeMismatch: agreement probe: decision draft_tokens differs at round 1 within " \
           "replica [0, 1, 2, 3]" in out and "values [0, 0, 0, 0]" in out
    relayed = cli("simulate", _spec(tmp_path, PP2_EAGLE_SAMPLED), "--rounds", "3", "--requests", "2")
    assert relayed.returncode == 0 and "PASS" in relayed.stdout, relayed.stdout + relayed.stderr


def test_a_draft_layer_on_a_target_layer_fails_a_mixed_run_by_the_target_logit(tmp_path):
    """Found by the seeded sweep: the shadowed target layer left every argmax of a 3-round mixed
    run as the model's, so the run passed; the logit of each prediction does not survive it."""
    text = PP2_EAGLE_SAMPLED.replace("sampling: sampling, num_steps: 5, topk: 2, num_draft_tokens: 3",
                                     "sampling: mixed, num_steps: 3, topk: 4, num_draft_tokens: 8")
    spec = _spec(tmp_path, text + "sync: {policy: rng}\npipeline: {draft_layer_ids: stage_local}\n")
    assert "collides with target layer 3" in cli("check", spec).stdout
    done = cli("simulate", spec, "--rounds", "3", "--requests", "2", "--allow-errors")
    assert done.returncode == 3, done.stdout + done.stderr
    out = " ".join(done.stdout.split())
    assert "the target (rank 2) predicts" in out and "with logit" in out
    assert "the target ran other weights or inputs than the model's" in out


def test_a_traced_run_in_this_process_leaves_no_tracing_behind(tmp_path, monkeypatch):
    monkeypatch.delenv("SPECPLAN_TRACE_DIR", raising=False)
    done = cli("simulate", _spec(tmp_path, EAGLE_TP2), "--rounds", "1", "--trace-dir", tmp_path / "t")
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["rank0.jsonl", "rank1.jsonl"]
    assert "SPECPLAN_TRACE_DIR" not in os.environ
