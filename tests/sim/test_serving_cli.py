"""`specplan simulate SPEC --chunked-prefill CHUNK` through the real CLI (slow): one gloo process
per pipeline stage; greedy identity at pp 2 and 3, and the seed's two bugs injected, each without
batch identity (wrong tokens, the first one named) and with it (the runtime's guard on stage 0
raises BatchMismatch at the first affected entry, rows and ranks named)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import cli

pytestmark = pytest.mark.slow


def _spec(tmp_path: Path, pp: int, identity: bool, discount: str = "bound", relay: str = "",
          tp: int = 1) -> str:
    path = tmp_path / f"serving-pp{pp}-{identity}-{discount}{relay}-tp{tp}.yaml"
    path.write_text(f"name: serving-pp{pp}\nengine: vllm\ntopology: {{tp: {tp}, pp: {pp}, device: cpu}}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: eagle3, num_steps: 3, sampling: greedy}\n"
                    f"pipeline: {{sample_discount: {discount}{', relay: ' + relay if relay else ''}}}\n"
                    f"runtime: {{max_batch: 2, batch_identity: {str(identity).lower()}}}\n")
    return str(path)


def _simulate(spec: str, *extra: str, code: int | None = None):
    """12 requests in chunks of 4 through the real CLI; `code`: the exit it must end with."""
    return cli("simulate", spec, "--chunked-prefill", "4", "--requests", "12", *extra, process=True,
               code=code)


def _flat(text: str) -> str:
    return re.sub(r"\s*\n\s*", " ", text)


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("identity", [True, False])
def test_greedy_output_is_token_identical(tmp_path, pp, identity):
    out = _flat(_simulate(_spec(tmp_path, pp, identity), code=0).stdout)
    assert "token-identical to plain greedy decoding: 12 requests" in out
    mixed = re.search(r"mixing prefill chunks and decode rows: (\d+)", out).group(1)
    reused = re.search(r"rows reused while an entry of their last request was in flight: (\d+)", out).group(1)
    late = re.search(r"entries consumed late: (\d+)", out).group(1)
    assert int(mixed) > 0 and int(reused) > 0 and int(late) > 0


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("inject", ["stale-slot", "early-stop"])
def test_injection_without_identity_finishes_with_wrong_tokens(tmp_path, pp, inject):
    out = _flat(_simulate(_spec(tmp_path, pp, False), "--inject", inject, code=3).stdout)
    assert re.search(r"wrong tokens: the first is request \d+ token \d+: \d+ where plain greedy "
                     r"decoding gives \d+", out), out
    assert "BatchMismatch" not in out


ROWS = {  # what stage 0 (rank 0) holds in the first differing row, and what the last stage holds
    "stale-slot": (r"request \d+ gen [1-9]\d*", r"no request \(id -1: the row is left out\)"),
    "early-stop": (r"no request \(id -1: the row is left out\)", r"request \d+ gen \d+"),
}


@pytest.mark.parametrize("pp", [2, 3])
@pytest.mark.parametrize("inject", ["stale-slot", "early-stop"])
def test_injection_with_identity_raises_batch_mismatch_in_the_runtime(tmp_path, pp, inject):
    out = _flat(_simulate(_spec(tmp_path, pp, True), "--inject", inject, code=3).stdout)
    mine, theirs = ROWS[inject]
    # The runtime's text (specplan/runtime/identity.py): the accept converge that carries the
    # entry, the round it was sent for, the two processes by rank, their digests.
    assert re.search(rf"FAIL: stopped: BatchMismatch: batch mismatch at site eagle3_accept \(boundary 2\), "
                     rf"round \d+: row \d+: rank 0 holds {mine} where rank {pp - 1} \(the source\) holds "
                     rf"{theirs}; the ranks of group replica disagree on which requests the rows are "
                     rf"\(batch digest [0-9a-f]{{16}} here, [0-9a-f]{{16}} from rank {pp - 1}\) "
                     rf"\(raised by the runtime's guard on rank 0, stage 0, consuming the entry at "
                     rf"round \d+\)", out), out
    assert "wrong tokens" not in out


@pytest.mark.parametrize("inject", ["stale-slot", "early-stop"])
def test_a_plan_with_a_ring_relay_carries_the_entry_in_rt_relay(tmp_path, inject):
    """`pipeline.relay: ring`: the accept site has a pp relay (last stage -> 0 -> 1): the entry
    crosses in `rt.relay`, and the mismatch names the relay and the pp group."""
    clean = _simulate(_spec(tmp_path, 3, True, relay="ring"))
    assert clean.returncode == 0 and "token-identical" in clean.stdout, clean.stdout + clean.stderr
    out = _flat(_simulate(_spec(tmp_path, 3, True, relay="ring"), "--inject", inject, code=3).stdout)
    assert re.search(r"BatchMismatch: batch mismatch at site eagle3_accept \(relay 655\d\d\), round \d+: "
                     r"row \d+: rank 0 holds .* where rank 2 \(the source\) holds .*; the ranks of group pp "
                     r"disagree", out), out


def test_one_process_per_stage_refuses_tp_2(tmp_path):
    run = _simulate(_spec(tmp_path, 2, True, tp=2))
    assert run.returncode == 2
    assert "one process per pipeline stage; this spec has 4 ranks for 2 stages" in _flat(run.stdout)


def test_the_mismatch_is_the_first_affected_entry(tmp_path):
    """The entry the runtime stops at was sent before the first wrong token of the silent run was
    sampled, and consumed at least pp rounds after it was sent."""
    on = _flat(_simulate(_spec(tmp_path, 2, True), "--inject", "stale-slot").stdout)
    off = _flat(_simulate(_spec(tmp_path, 2, False), "--inject", "stale-slot").stdout)
    sent = int(re.search(r"boundary 2\), round (\d+):", on).group(1))
    consumed = int(re.search(r"consuming the entry at round (\d+)", on).group(1))
    holder = re.search(r"rank 0 holds request (\d+) gen", on).group(1)
    assert consumed >= sent + 2
    assert re.search(rf"the first is request {holder} token", off), (on, off)


def test_the_plans_drafts_discount_is_refused_then_shown(tmp_path):
    spec = _spec(tmp_path, 2, False, discount="drafts")
    refused = _simulate(spec)
    assert refused.returncode == 3 and "sampled-token broadcast" in _flat(refused.stdout)
    shown = _simulate(spec, "--allow-errors")
    assert shown.returncode == 3 and "wrong tokens: the first is request" in _flat(shown.stdout)
