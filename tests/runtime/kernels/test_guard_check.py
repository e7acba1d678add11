"""guard_write / guard_check: the Triton kernel (interpreter) against the torch reference."""

from __future__ import annotations

import pytest
import torch

from specplan.runtime.guard import HEADER_WORDS, ROUND_WORD, words_header
from specplan.runtime.kernels.guard_check import guard_check, guard_write

W, R = HEADER_WORDS, 2 + 2 * HEADER_WORDS


def _row(boundary: int, source: int) -> torch.Tensor:
    row = torch.zeros(R, dtype=torch.int64)
    row[0], row[-1], row[1], row[3] = 1, source, boundary, 0x1234  # id (live rows 0), fingerprint
    return row


@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_write_then_check_agrees_and_a_mismatch_is_kept_once(impl):
    slot, rnd = torch.zeros(W, dtype=torch.int64), torch.tensor([41])
    record = torch.zeros(R, dtype=torch.int64)
    mine, other = _row(3, 5), _row(4, 5)
    guard_write(slot, mine, rnd, round_index=ROUND_WORD, words=W, impl=impl)
    assert words_header(slot.tolist()) == (3, 0, 41, 0x1234, 0)
    guard_check(slot, mine, rnd, record, round_index=ROUND_WORD, words=W, impl=impl)
    assert record.tolist() == [0] * R  # equal: nothing kept
    guard_check(slot, other, rnd, record, round_index=ROUND_WORD, words=W, impl=impl)
    first = record.tolist()
    assert first[0] == 1 and first[-1] == 5
    assert words_header(first[1:1 + W]) == (4, 0, 41, 0x1234, 0)  # expected
    assert words_header(first[1 + W:1 + 2 * W]) == (3, 0, 41, 0x1234, 0)  # received
    rnd.fill_(42)
    guard_check(slot, other, rnd, record, round_index=ROUND_WORD, words=W, impl=impl)
    assert record.tolist() == first  # the first mismatch stays


def test_triton_matches_the_reference_on_random_headers():
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        slot = torch.randint(0, 3, (W,), generator=g)
        row = torch.randint(0, 3, (R,), generator=g)
        rnd = torch.randint(0, 3, (1,), generator=g)
        record = torch.randint(0, 2, (R,), generator=g) * torch.randint(0, 2, (1,), generator=g)
        outs = []
        for impl in ("torch", "triton"):
            s, r, rec = slot.clone(), row.clone(), record.clone()
            guard_check(s, r, rnd, rec, round_index=ROUND_WORD, words=W, impl=impl)
            outs.append((rec.tolist(), r[1:1 + W].tolist()))
        assert outs[0] == outs[1]
