"""The batch digest (specplan/runtime/batch.py) without processes: host and device forms agree
bit for bit, every kind of difference moves it, the guard's batch word joins both compares,
and the trace records (request, generation) per row."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from specplan.runtime.batch import (Batch, BatchHistory, as_batch, digest_device, digest_host,
                                    first_difference)
from specplan.runtime.guard import (BATCH_WORD, HEADER_SLOTS, DeviceFlag, DeviceGuard, GuardHeader,
                                    batch_only, header_slot, words_header)
from specplan.runtime.tracing import TraceWriter


def test_host_and_device_digests_agree_bit_for_bit():
    g = torch.Generator().manual_seed(7)
    for n in (0, 1, 5, 256):
        reqs = torch.randint(-2**63, 2**63 - 1, (n,), generator=g)
        gens = torch.randint(0, 2**31, (n,), generator=g, dtype=torch.int64)
        b = Batch(reqs, gens)
        assert digest_host(b, n) == int(digest_device(b, n, torch.device("cpu"))[0])
        small = Batch(reqs.to(torch.int32), gens.to(torch.int32))  # int32 ids, as engines hold them
        assert digest_host(small, n) == int(digest_device(small, n, torch.device("cpu"))[0])
        assert digest_host(Batch(reqs.tolist(), gens.tolist()), n) == digest_host(b, n)


def test_a_request_a_generation_or_the_order_moves_the_digest():
    base = digest_host(Batch([10, 11, 12, 13], [0, 0, 0, 0]), 4)
    others = [Batch([10, 11, 99, 13], [0, 0, 0, 0]), Batch([10, 11, 12, 13], [0, 1, 0, 0]),
              Batch([10, 12, 11, 13], [0, 0, 0, 0]), Batch([10, 11, 12, 13, 14], [0] * 5)]
    digests = {digest_host(b, len(b.pairs())) for b in others}
    assert base not in digests and len(digests) == len(others)
    assert digest_host(Batch([10, 11, 12, 13, 14], [0] * 5), 4) == base  # rows past live_rows ignored


def test_the_forms_of_requests():
    ids = [3, 4, 5]
    assert as_batch(None) is None
    assert digest_host(as_batch(ids), 3) == digest_host(Batch(ids, [0, 0, 0]), 3)  # ids alone: gen 0
    assert digest_host(as_batch((ids, [1, 1, 1])), 3) == digest_host(Batch(ids, [1, 1, 1]), 3)
    assert digest_host(as_batch((torch.tensor(ids), torch.tensor([1, 1, 1]))), 3) == \
        digest_host(Batch(ids, [1, 1, 1]), 3)
    assert as_batch(("a", "b")).pairs() == [("a", 0), ("b", 0)]  # a tuple of ids is ids
    s = digest_host(Batch(["req0", "req1"]), 2)
    assert s == digest_host(Batch(("req0", "req1")), 2) and s != digest_host(Batch(["req1", "req0"]), 2)
    with pytest.raises(ValueError, match="2 request ids and 2 generations for 3 live rows"):
        digest_host(Batch([1, 2], [0, 0]), 3)


def test_first_difference_and_history():
    assert first_difference([(1, 0), (2, 0)], [(1, 0), (2, 1)]) == 1
    assert first_difference([(1, 0)], [(1, 0)]) is None
    h = BatchHistory(depth=2)
    for r in range(4):
        h.record(r, r * 10)
    assert h.at(3) == 30 and h.at(2) == 20
    with pytest.raises(KeyError, match=r"no batch recorded for round 1 \(kept: rounds \[2, 3\]\)"):
        h.at(1)


def test_the_header_states_the_batch_word():
    assert HEADER_SLOTS[-1] == ("batch", "int64", 24) and BATCH_WORD == 3


def test_host_guard_compares_the_batch_word():
    mine, theirs = GuardHeader(4, 0x1234), GuardHeader(4, 0x1234)
    for h, word in ((mine, 111), (theirs, 222)):
        h.set(3, 9)
        h.set_batch(word)
    slot = np.zeros(4, dtype=np.int64)
    theirs.write(slot)
    assert not mine.matches(slot)
    assert batch_only(words_header(slot), mine.expected())
    mine.set(2, 9)  # live rows differ too: an order problem, not a batch one
    assert not batch_only(words_header(slot), mine.expected())


def test_device_guard_keeps_a_batch_word_mismatch_in_the_flag():
    flag = DeviceFlag(torch.device("cpu"))
    src, dst = (DeviceGuard(4, 0x1234, 0, flag, torch.device("cpu")) for _ in range(2))
    buf = torch.zeros(64, dtype=torch.uint8)
    slot = header_slot(buf, device_path=True)
    for g, ids in ((src, [1, 2]), (dst, [1, 2])):
        g.set(2, 5)
        g.set_batch(digest_device(Batch(torch.tensor(ids), torch.tensor([0, 1])), 2, "cpu"))
    src.write(slot)
    dst.matches(slot)
    assert flag.read() is None  # same rows: nothing kept
    dst.set_batch(digest_device(Batch(torch.tensor([1, 2]), torch.tensor([0, 0])), 2, "cpu"))
    dst.matches(slot)
    hit = flag.read()
    expected, got = words_header(hit[1:5]), words_header(hit[5:9])
    assert batch_only(got, expected)
    assert got[4] == digest_host(Batch([1, 2], [0, 1]), 2) and expected[4] == digest_host(Batch([1, 2], [0, 0]), 2)


def test_trace_records_request_and_generation_per_row(tmp_path):
    w = TraceWriter(str(tmp_path), 1, 0, "f" * 64)
    w.converge(3, "s", {"d": torch.tensor([[1], [2]])}, Batch(torch.tensor([17, 18]), [2, 0]), None)
    w.converge(4, "s", {"d": torch.tensor([[1], [2]])}, ["a", "b"], None)
    w.converge(5, "s", {"d": torch.tensor([[1]])}, None, None)
    w.close()
    recs = [json.loads(l) for l in (tmp_path / "rank1.jsonl").read_text().splitlines()]
    assert [(r["row"], r["request"], r["generation"]) for r in recs] == \
        [(0, 17, 2), (1, 18, 0), (0, "a", 0), (1, "b", 0), (0, 0, None)]
