"""`specplan simulate SPEC --chunked-prefill CHUNK` through the real CLI (slow): greedy identity at
pp 2 and 3, and the seed's two bugs injected, each without batch identity (wrong tokens, the
first one named) and with it (BatchMismatch at the first affected round, rows named)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _spec(tmp_path: Path, pp: int, identity: bool, discount: str = "bound") -> str:
    path = tmp_path / f"serving-pp{pp}-{identity}-{discount}.yaml"
    path.write_text(f"name: serving-pp{pp}\nengine: vllm\ntopology: {{tp: 1, pp: {pp}, device: cpu}}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: eagle3, num_steps: 3, sampling: greedy}\n"
                    f"pipeline: {{sample_discount: {discount}}}\n"
                    f"runtime: {{max_batch: 2, batch_identity: {str(identity).lower()}}}\n")
    return str(path)


def _simulate(spec: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specplan.cli", "simulate", spec, "--chunked-prefill", "4",
                           "--requests", "12", *extra], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _flat(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text)


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("identity", [True, False])
def test_greedy_output_is_token_identical(tmp_path, pp, identity):
    run = _simulate(_spec(tmp_path, pp, identity))
    assert run.returncode == 0, run.stdout + run.stderr
    out = _flat(run.stdout)
    assert "token-identical to plain greedy decoding: 12 requests" in out
    mixed = re.search(r"mixing prefill chunks and decode rows: (\d+)", out).group(1)
    reused = re.search(r"rows reused while an entry of their last request was in flight: (\d+)", out).group(1)
    late = re.search(r"entries consumed late: (\d+)", out).group(1)
    assert int(mixed) > 0 and int(reused) > 0 and int(late) > 0


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("inject", ["stale-slot", "early-stop"])
def test_injection_without_identity_finishes_with_wrong_tokens(tmp_path, pp, inject):
    run = _simulate(_spec(tmp_path, pp, False), "--inject", inject)
    assert run.returncode == 3, run.stdout + run.stderr
    out = _flat(run.stdout)
    assert re.search(r"wrong tokens: the first is request \d+ token \d+: \d+ where plain greedy "
                     r"decoding gives \d+", out), out
    assert "BatchMismatch" not in out


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("inject,what", [("stale-slot", "draft update"), ("early-stop", "sampled tokens")])
def test_injection_with_identity_raises_batch_mismatch(tmp_path, pp, inject, what):
    run = _simulate(_spec(tmp_path, pp, True), "--inject", inject)
    assert run.returncode == 3, run.stdout + run.stderr
    out = _flat(run.stdout)
    assert "FAIL: stopped: BatchMismatch: batch mismatch at site eagle3_accept" in out, out
    assert re.search(rf"round \d+ \(consumed at round \d+\), {what}: row \d+ \(state row \d+\): rank 0 "
                     rf"\(stage 0\) .* where rank {pp - 1} \(the source\) holds request \d+ gen \d+", out), out
    assert "wrong tokens" not in out


def test_the_plans_drafts_discount_is_refused_then_shown(tmp_path):
    spec = _spec(tmp_path, 2, False, discount="drafts")
    refused = _simulate(spec)
    assert refused.returncode == 3 and "sampled-token broadcast" in _flat(refused.stdout)
    shown = _simulate(spec, "--allow-errors")
    assert shown.returncode == 3 and "wrong tokens: the first is request" in _flat(shown.stdout)
