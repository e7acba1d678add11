"""Batch identity on real gloo ranks: one rank's batch differs by a request, a generation or
the order of its rows, and the receiver raises BatchMismatch within the round, naming the
first differing row and both (request, generation) pairs; a PP relay consumed 1 or 2 rounds
late is checked against the batch of the round it was sent for."""

from __future__ import annotations

import pytest

from specplan.runtime.batch import Batch, digest_host
from specplan.runtime.plan_view import PlanView
from tests.helpers import compile_spec
from tests.ranks import launch
import specs_rt

TP4_DSPARK = specs_rt.TP2_DSPARK.replace("rt-tp2-dspark", "rt-tp4-dspark").replace("tp: 2", "tp: 4")
# The source hosts the store its receivers fetch its rows through, and leaves once its next
# collective times out: on a loaded machine a receiver of four reached its check after the
# 20 s the others' plan allows (CI saw "could not fetch rank 0's rows", on the device path and
# on the host's "order" case), so the 4-rank cases wait 60.
TP4_DSPARK_SLOW_PEERS = TP4_DSPARK.replace("timeout_s: 20", "timeout_s: 60")
RING = """
name: rt-ppPP-ring
engine: sglang
topology: {tp: 1, pp: PP, device: cpu}
model: {num_layers: 9, hidden_size: 64, vocab_size: 1000}
speculative: {method: dspark, num_steps: 3}
sync: {policy: all}
pipeline: {relay: ring}
runtime: {max_batch: 8, timeout_s: 20}
"""
BASE = ([10, 11, 12, 13], [0, 0, 0, 0])
ODD = {"request": ([10, 11, 99, 13], [0, 0, 0, 0]), "generation": ([10, 11, 12, 13], [0, 1, 0, 0]),
       "order": ([10, 12, 11, 13], [0, 0, 0, 0])}
DEVICE = " (compared on the device, read at check_round)"


def _hex(rows) -> str:
    return f"{digest_host(Batch(*rows), len(rows[0])) & (2**64 - 1):016x}"


def _message(b, rnd, row, rank, mine, source, theirs, what="boundary", when="") -> str:
    return (f"ERROR BatchMismatch: batch mismatch at site {b.label} ({what} {b.id}), round {rnd}: "
            f"row {row}: rank {rank} holds request {mine[0][row]} gen {mine[1][row]} where rank "
            f"{source} (the source) holds request {theirs[0][row]} gen {theirs[1][row]}; the ranks "
            f"of group {b.family} disagree on which requests the rows are (batch digest "
            f"{_hex(mine)} here, {_hex(theirs)} from rank {source}){when}")


def _first_broadcast(path):
    view = PlanView(path)
    return next(b for b in view.boundaries if b.op == "broadcast")


def _check(results, b, *, odd_rank, row, variant, rnd=2, when=""):
    """Every receiver whose batch differs from the source's raised, at round `rnd`, before
    using a value of that round (it printed USED for the rounds before only)."""
    source = 0  # the tp group's source member in these plans
    raised = [r.rank for r in results if r.rank != source
              and (ODD[variant] if r.rank == odd_rank else BASE) != (ODD[variant] if source == odd_rank else BASE)]
    assert raised
    for r in results:
        mine = ODD[variant] if r.rank == odd_rank else BASE
        theirs = ODD[variant] if source == odd_rank else BASE
        used = [l for l in r.stdout.splitlines() if l.startswith("USED")]
        if r.rank != source and mine != theirs:
            assert r.returncode == 3, r.stdout + r.stderr
            assert r.error == _message(b, rnd, row, r.rank, mine, source, theirs, when=when), r.error
            assert used == [f"USED {i}" for i in range(1, rnd)], r.stdout
        else:
            assert "ERROR BatchMismatch" not in r.stdout, r.stdout  # agreeing ranks raise none
        if r.rank == source:  # left alone when the receivers stopped: its error says why
            assert r.error.startswith("ERROR CollectiveTimeout:"), r.stdout + r.stderr
            assert "; peers found a batch mismatch in what this rank sent (rank " in r.error, r.error
            assert any(f"rank {x} at {b.label} round {rnd}" in r.error for x in raised), r.error


@pytest.mark.parametrize("variant, row", [pytest.param("request", 2, marks=pytest.mark.slow),
                                          ("generation", 1),
                                          pytest.param("order", 1, marks=pytest.mark.slow)])
def test_world2_a_receiver_with_another_batch_raises_within_the_round(tmp_path, variant, row):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "mismatch", path, variant, 1, 2, module="batch_workers", timeout=90)
    _check(results, _first_broadcast(path), odd_rank=1, row=row, variant=variant)


@pytest.mark.slow
@pytest.mark.parametrize("variant, odd_rank, row, form", [
    ("request", 2, 2, "tensor"),   # one receiver off by a request: it alone raises
    ("generation", 3, 1, "pair"),  # a reused state row: same request id, next generation
    ("order", 0, 1, "batch"),      # the source's rows reordered: every receiver raises
])
def test_world4_each_difference_is_caught_with_the_exact_message(tmp_path, variant, odd_rank, row, form):
    path = compile_spec(tmp_path, TP4_DSPARK_SLOW_PEERS)
    results = launch(4, "mismatch", path, variant, odd_rank, 2, "host", form, module="batch_workers",
                     timeout=120)
    _check(results, _first_broadcast(path), odd_rank=odd_rank, row=row, variant=variant)


@pytest.mark.slow
@pytest.mark.parametrize("world, odd_rank", [(2, 1), (4, 0)])
def test_device_path_compares_the_batch_word_on_the_device(tmp_path, world, odd_rank):
    """Hot path "device" (forced on a CPU): ids as tensors, the digest made by torch ops, the
    batch word compared by the guard kernel, raised at check_round of the same round."""
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK if world == 2 else TP4_DSPARK_SLOW_PEERS)
    results = launch(world, "mismatch", path, "generation", odd_rank, 2, "device", "tensor",
                     module="batch_workers", timeout=120)
    _check(results, _first_broadcast(path), odd_rank=odd_rank, row=1, variant="generation", when=DEVICE)


def test_device_path_digest_makes_no_host_read(tmp_path):
    """Rows handed over as tensors on the runtime's device: the digest is made and compared
    on the device, so a converge still reads nothing back (HostSyncRecorder: zero events)."""
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    for r in launch(2, "nosync", path, module="batch_workers", timeout=90):
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["calls"] > 0 and r.result["hot"] == [], r.result


def test_without_batch_identity_the_same_run_finishes_silently(tmp_path):
    """runtime.batch_identity off (bind's override): the rows' identities are not compared,
    and the run with a reused row ends with every value 'agreeing': the bug is silent."""
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "mismatch", path, "generation", 1, 2, "host", "batch", "off",
                     module="batch_workers", timeout=90)
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert [l for l in r.stdout.splitlines() if l.startswith("USED")] == ["USED 1", "USED 2", "USED 3"]


@pytest.mark.parametrize("pp, k", [(2, 1), pytest.param(2, 2, marks=pytest.mark.slow),
                                   pytest.param(3, 1, marks=pytest.mark.slow),
                                   pytest.param(3, 2, marks=pytest.mark.slow)])
def test_a_relay_consumed_late_is_checked_against_the_round_it_was_sent_for(tmp_path, pp, k):
    """Row 1's state row is reused at round 3 (generation 1). Stage 0 consumes round r's relay
    at round r + k: with the batch it held for round r every relay passes; with its current
    batch the first relay sent before the reuse and consumed after it raises."""
    path = compile_spec(tmp_path / "p", RING.replace("PP", str(pp)))
    view = PlanView(path)
    r = view.relays[0]
    ok = launch(pp, "late", path, r.label, k, "sent", module="batch_workers", timeout=90)
    for res in ok:
        assert res.returncode == 0, res.stdout + res.stderr
    stage0 = ok[0].result["consumed"]
    assert stage0[0] == [k, 0] and stage0[-1] == [5 + k, 5]  # every relay consumed k rounds late
    bad = launch(pp, "late", path, r.label, k, "current", module="batch_workers", timeout=90)
    sent = 3 - k  # consumed at round 3, after the reuse; sent before it
    held, source = ([0, 1, 2, 3], [0, 1, 0, 0]), pp - 1
    assert bad[0].returncode == 3, bad[0].stdout + bad[0].stderr
    assert bad[0].error == _message(r, sent, 1, 0, held, source, ([0, 1, 2, 3], [0, 0, 0, 0]),
                                    what="relay"), bad[0].error


def test_traces_of_the_silent_run_make_diff_name_the_batch_disagreement(tmp_path):
    """The same run without batch identity, traced: `specplan diff` names the reused row as a
    batch disagreement (exit 3), not as the value divergence it would otherwise look like."""
    from test_trace_diff import _diff

    path = compile_spec(tmp_path / "p", specs_rt.TP2_DSPARK)
    trace = tmp_path / "trace"
    results = launch(2, "mismatch", path, "generation", 1, 2, "host", "batch", "off",
                     module="batch_workers", timeout=90, env={"SPECPLAN_TRACE_DIR": str(trace)})
    assert all(r.returncode == 0 for r in results), [r.stdout + r.stderr for r in results]
    b = _first_broadcast(path)
    first = b.sites[0]
    decision = next(f.decision for f in b.fields if f.site == first)
    out = _diff(trace)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == (
        f"batch disagreement: round 2, site {first}, decision {decision}, replica 0, row 1: "
        f"rank 1 holds request 11 gen 1 where rank 0 holds request 11 gen 0")


@pytest.mark.parametrize("pp, odd", [(2, "none"), (2, "gen"), pytest.param(3, "none", marks=pytest.mark.slow),
                                     pytest.param(3, "gen", marks=pytest.mark.slow),
                                     pytest.param(2, "round", marks=pytest.mark.slow)])
def test_a_relay_carried_in_the_engines_own_message_is_checked_by_relay_in(tmp_path, pp, odd):
    """relay_out / relay_in (the SGLang plugin's relay): the bytes travel in a message the test
    sends stage to stage as SGLang does; every earlier stage checks them against its own round
    and rows. A reused row on stage 0 is a BatchMismatch naming it; a round off, a DesyncError."""
    path = compile_spec(tmp_path / "p", RING.replace("PP", str(pp)))
    r = PlanView(path).relays[0]
    results = launch(pp, "halves", path, r.label, odd, module="batch_workers", timeout=90)
    stage0 = results[0]
    for res in results[:-1] if odd == "none" else ():  # else later stages lose their upstream
        assert res.returncode == 0, res.stdout + res.stderr
        assert [l for l in res.stdout.splitlines() if l.startswith("USED")] == ["USED 1", "USED 2", "USED 3"]
    if odd == "gen":
        mine, theirs = ([10, 11, 12, 13], [0, 1, 0, 0]), BASE
        assert stage0.returncode == 3, stage0.stdout + stage0.stderr
        assert stage0.error == _message(r, 2, 1, 0, mine, pp - 1, theirs, what="relay"), stage0.error
    elif odd == "round":
        assert stage0.returncode == 3 and stage0.error.startswith("ERROR DesyncError:"), stage0.stdout
        assert "round" in stage0.error, stage0.error
    if odd != "none":
        assert [l for l in stage0.stdout.splitlines() if l.startswith("USED")] == ["USED 1"]
