"""`check` and `simulate` never disagree: every ERROR class of check, run anyway with
`simulate --allow-errors`, fails the way the finding predicts (a named CollectiveTimeout,
ProbeMismatch, LayoutMismatch or BatchMismatch, or wrong tokens), and without the flag simulate refuses it.

One spec per class from tests/verify/specs/error-*.yaml (test_check_cli keeps nine) (the sim
times its collectives out itself; the spec's runtime.timeout_s bounds the ranks' start); two run in a variant that makes the failure observable on the CPU: the idle
DP rank needs a replica without requests (--requests 1), and a group wider than the replica runs
greedy (sampled tokens have no single-process reference), where batch identity names the rows of
the other replica's requests; the draft-count discount of the sampled-token broadcast needs the
serving loop (--chunked-prefill).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import cli


SPECS = Path(__file__).resolve().parents[1] / "verify" / "specs"
CASES = {  # class -> (variant of the spec text, simulate options, what the report must show)
    "error-dynamic-width": ({}, [], "CollectiveTimeout: collective for site eagle3_target"),
    "error-idle-dp-skips-moe": ({}, ["--requests", "1"], "CollectiveTimeout: sim all_gather on group tp"),
    # Each rank reads its own free memory (--inject gate): the capture over tp meets ranks that
    # chose differently, named by the gate.
    "error-gate-unagreed": ({}, ["--inject", "gate"], "GateMismatch: gate dspark_draft_graph_mem"),
    "error-sampling-accept-unconverged": ({}, [], "ProbeMismatch: agreement probe: decision predict differs"),
    "error-cp-outside-group": ({}, [], "ProbeMismatch: agreement probe: decision next_token_ids differs"),
    # The replicas serve different requests, so batch identity names the rows the group mixes.
    "error-group-wider-than-replica": ({"sampling: sampling": "sampling: greedy"}, [],
                                       "BatchMismatch: batch mismatch at site eagle_target"),
    # Every stage reads the drafts: the probe compares them across the stages, stage 0's
    # placeholders against the last stage's drafts.
    "error-drafts-not-relayed": ({}, [], "decision draft_tokens differs at round 1"),
    "error-stage-local-draft-layers": ({}, [], "plain greedy decoding gives"),
    "error-sample-discount": ({}, ["--chunked-prefill", "4", "--requests", "12"],
                              "rank 0 holds no request (id -1: the row is left out)"),
    "error-stage-local-taps": ({}, [], "LayoutMismatch: the drafter on stage 1 (rank 1) reads taps "
                                       "[1, 3, 7] but the stages hand it the residuals entering layers "
                                       "[1, 3, 5, 7]"),
}


def test_every_error_class_has_a_case():
    assert sorted(CASES) == sorted(p.stem for p in SPECS.glob("error-*.yaml"))


def spec_file(tmp: Path, name: str) -> str:
    text = (SPECS / f"{name}.yaml").read_text()
    for old, new in CASES[name][0].items():
        text = text.replace(old, new)
    if "--chunked-prefill" in CASES[name][1]:  # the serving loop binds the spec's own timeout
        text += "runtime: {timeout_s: 10}\n"
    (tmp / f"{name}.yaml").write_text(text)
    return str(tmp / f"{name}.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_simulate_shows_the_predicted_failure(tmp_path, name):
    spec = spec_file(tmp_path, name)
    assert cli("check", spec).exit_code == 3  # the variant is still an ERROR
    refused = cli("simulate", spec, "--rounds", "3", "--requests", "2")
    assert refused.exit_code == 3 and "not simulated" in refused.output
    res = cli("simulate", spec, "--rounds", "3", "--requests", "2",
              "--allow-errors", *CASES[name][1])
    assert res.exit_code == 3, res.output[-3000:]
    assert "FAIL" in res.output and CASES[name][2] in res.output, res.output[-3000:]
