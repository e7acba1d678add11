"""The serving loop of `simulate --chunked-prefill`: its schedule, its greedy identity and the rows
each side hands the runtime per entry, fast (every stage in this process, `LocalLink`). The gloo
runs, where the runtime's guard raises BatchMismatch, are in test_serving_cli.py (slow)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.runtime.batch import Batch, digest_host
from specplan.sim.serving import (PAD, LocalLink, RequestSpec, Serving, ServingConfig, make_requests,
                                  plain_decode, target_next)

REQUESTS = make_requests(12, 0, 4)


class Recording(LocalLink):
    """Notes the first entry whose two sides' rows (what each hands the runtime) differ."""

    def __init__(self):
        self.first, self.entries = None, 0

    def deliver(self, e, t, mine, sent):
        self.entries += 1
        if self.first is None and mine != sent:
            self.first = (e.round, t, mine, sent)
        return super().deliver(e, t, mine, sent)


def run(pp=2, inject="", identity=True, requests=REQUESTS, link=None, **kw):
    cfg = ServingConfig(pp=pp, max_batch=kw.pop("max_batch", 2), chunk=kw.pop("chunk", 4),
                        max_drafts=kw.pop("max_drafts", 3), identity=identity, inject=inject, **kw)
    return Serving(cfg, requests, link).run()


def test_plain_decoding_is_the_toy_targets_greedy_chain():
    out = plain_decode([5, 6, 7], 4)
    seq = [5, 6, 7]
    for tok in out:
        assert tok == target_next(seq)
        seq.append(tok)
    assert len(out) == 4


@pytest.mark.parametrize("pp", [1, 2, 3])
@pytest.mark.parametrize("identity", [True, False])
def test_greedy_identity_with_mixed_rounds_and_reused_rows(pp, identity):
    o = run(pp=pp, identity=identity)
    assert o.error is None and o.first_wrong is None
    assert o.outputs == o.expected
    s = o.stats
    assert s["mixed_rounds"] > 0  # prefill chunks beside decode rows
    assert s["reuses"] > 0 if pp > 1 else True  # a row taken while its last entry was in flight
    assert s["late_entries"] > 0 if pp > 1 else True
    assert s["dropped_rows"] == s["stale_draft_rows"] == 0


def test_a_request_decodes_every_pp_rounds_and_its_last_chunk_samples():
    sim = Serving(ServingConfig(pp=3, max_batch=2, chunk=2, max_drafts=2),
                  [RequestSpec(0, (1, 2, 3, 4, 5), 6), RequestSpec(1, (7,), 3)])
    out = sim.run()
    assert out.outputs == out.expected
    rounds = {t: rows for t, rows in sim.log}
    assert rounds[0] == [(0, "chunk", 2)]  # one admission a round
    assert rounds[1] == [(0, "chunk", 2), (1, "chunk", 1)]  # request 1's only chunk samples
    assert rounds[2] == [(0, "chunk", 1)] and 3 not in rounds  # a round with no rows is skipped
    assert rounds[4] == [(1, "decode", 2)]  # pp rounds after its first token
    assert rounds[5] == [(0, "decode", 2)]
    decode_rounds = [t for t, rows in sim.log for q, kind, _ in rows if q == 0 and kind == "decode"]
    assert all(b - a == 3 for a, b in zip(decode_rounds, decode_rounds[1:]))


def test_stale_slot_needs_a_late_entry_landing_after_the_new_owners_own():
    """One state row, pp 2: A finishes, B (one chunk) takes the row and samples at once, A's
    round has no rows left so its entry is consumed late, after B's: the unfiltered draft
    update hands B A's drafts at B's first decode."""
    a, b = RequestSpec(0, (3, 1, 4, 1, 5), 3), RequestSpec(1, (9, 2, 6), 8)
    for seed in range(40):
        o = run(pp=2, inject="stale-slot", identity=False, requests=[a, b], max_batch=1, seed=seed)
        if o.first_wrong is not None:
            break
    assert o.stats["late_entries"] >= 1 and o.stats["stale_draft_rows"] >= 1
    assert o.first_wrong[0] == 1  # B, the row's new owner, gets the wrong tokens
    clean = run(pp=2, identity=False, requests=[a, b], max_batch=1, seed=seed)
    assert clean.first_wrong is None and clean.stats["late_entries"] >= 1


@pytest.mark.parametrize("pp", [2, 3])
def test_clean_runs_hand_the_runtime_the_same_rows_on_both_sides(pp):
    link = Recording()
    o = run(pp=pp, link=link)
    assert o.first_wrong is None and link.entries > 0 and link.first is None


@pytest.mark.parametrize("pp", [2, 3])
def test_stale_slot_gives_wrong_tokens_and_stage_0_names_the_rows_new_owner(pp):
    link = Recording()
    off = run(pp=pp, inject="stale-slot", link=link)
    assert off.error is None and off.first_wrong is not None
    sent_at, consumed_at, mine, sent = link.first
    i = next(i for i, (a, b) in enumerate(zip(mine, sent)) if a != b)
    assert sent[i] == PAD and mine[i][1] >= 1  # drafts of a finished request, written to a reused row
    assert mine[i][0] == off.first_wrong[0]  # its new owner is the first request with wrong tokens
    assert consumed_at >= sent_at + pp
    assert digest_host(Batch(*zip(*mine)), len(mine)) != digest_host(Batch(*zip(*sent)), len(sent))


@pytest.mark.parametrize("pp", [2, 3])
def test_early_stop_gives_wrong_tokens_and_stage_0_leaves_a_row_out(pp):
    link = Recording()
    off = run(pp=pp, inject="early-stop", link=link)
    assert off.error is None and off.first_wrong is not None and off.stats["dropped_rows"] > 0
    _, _, mine, sent = link.first
    i = next(i for i, (a, b) in enumerate(zip(mine, sent)) if a != b)
    assert mine[i] == PAD and sent[i] == (off.first_wrong[0], 0)


def test_the_plans_drafts_discount_is_the_early_stop():
    a = run(pp=2, identity=False, discount="drafts")
    b = run(pp=2, identity=False, inject="early-stop")
    assert a.outputs == b.outputs and a.first_wrong is not None


@settings(max_examples=60, deadline=None)
@given(pp=st.integers(1, 3), rows=st.integers(1, 3), chunk=st.integers(1, 4),
       drafts=st.integers(0, 3), n=st.integers(1, 8), seed=st.integers(0, 1000))
def test_random_serving_is_token_identical(pp, rows, chunk, drafts, n, seed):
    link = Recording()
    o = run(pp=pp, max_batch=rows, chunk=chunk, max_drafts=drafts, requests=make_requests(n, seed, chunk),
            seed=seed, link=link)
    assert o.error is None and link.first is None
    assert o.outputs == o.expected
