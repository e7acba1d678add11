"""The device path's guard header, written and checked in one launch each.

Operands (int64, on one device, all made at bind):

- ``slot`` [W]: the header words of the buffer that was (or will be) sent;
- ``row`` [R]: one boundary's would-be record, ``[1, expected header words (W), received
  words (W), source rank]`` (R = 2 + 2W), its round word stale until a call;
- ``round_word`` [1]: the round, written once per round by the runtime;
- ``record`` [R]: the runtime's flag, ``record[0] == 0`` while no mismatch is kept.

:func:`guard_write` (the source) sets the round word of ``row``'s expected header and copies the
header into ``slot``. :func:`guard_check` (a receiver) sets the round word likewise, copies
``slot`` into ``row``'s received words, and when they differ from the expected words and
``record`` is clear, copies ``row`` into ``record``: the first mismatch stays until the host
reads it. Nothing is read on the host, so both can be captured in a CUDA graph. The reference
is a few torch ops (six launches on a GPU); the Triton kernel is one launch.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl


def _round_view(row: torch.Tensor, round_index: int) -> torch.Tensor:
    return row[1 + round_index: 2 + round_index]


def guard_write_torch(slot, row, round_word, round_index: int, words: int):
    _round_view(row, round_index).copy_(round_word)
    slot.copy_(row[1: 1 + words])


def guard_check_torch(slot, row, round_word, record, round_index: int, words: int):
    _round_view(row, round_index).copy_(round_word)
    expected, got = row[1: 1 + words], row[1 + words: 1 + 2 * words]
    got.copy_(slot)
    take = slot.ne(expected).any().logical_and_(record[0].eq(0))
    torch.where(take, row, record, out=record)


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def guard_kernel(slot_ptr, row_ptr, round_ptr, record_ptr, ROUND: tl.constexpr,
                     W: tl.constexpr, R: tl.constexpr, CHECK: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        in_exp = offs < W
        rnd = tl.load(round_ptr)
        expected = tl.load(row_ptr + 1 + offs, mask=in_exp, other=0)
        expected = tl.where(offs == ROUND, rnd, expected)
        tl.store(row_ptr + 1 + offs, expected, mask=in_exp)
        if CHECK:
            got = tl.load(slot_ptr + offs, mask=in_exp, other=0)
            tl.store(row_ptr + 1 + W + offs, got, mask=in_exp)
            bad = tl.sum((got != expected).to(tl.int32), axis=0) > 0
            clear = tl.load(record_ptr) == 0
            # The record as registers: constants from row, expected and received from above.
            in_row = offs < R
            rec = tl.load(row_ptr + offs, mask=in_row, other=0)  # its round and received: patched
            got_at = tl.load(slot_ptr + offs - 1 - W, mask=(offs >= 1 + W) & (offs < 1 + 2 * W), other=0)
            rec = tl.where((offs >= 1 + W) & (offs < 1 + 2 * W), got_at, rec)
            rnd_at = (offs == 1 + ROUND)
            rec = tl.where(rnd_at, rnd, rec)
            cur = tl.load(record_ptr + offs, mask=in_row, other=0)
            tl.store(record_ptr + offs, tl.where(bad & clear, rec, cur), mask=in_row)
        else:
            tl.store(slot_ptr + offs, expected, mask=in_exp)

    return guard_kernel


def _launch(slot, row, round_word, record, round_index: int, words: int, check: bool) -> None:
    block = next_pow2(row.numel())
    _kernel()[(1,)](slot, row, round_word, record if check else row, ROUND=round_index, W=words,
                    R=row.numel(), CHECK=check, BLOCK=block)


def guard_write(slot, row, round_word, *, round_index: int, words: int, impl="auto") -> None:
    """The source: the round into row's expected header, then the header into slot."""
    if resolve_impl(impl, slot) == "triton":
        _launch(slot, row, round_word, None, round_index, words, check=False)
    else:
        guard_write_torch(slot, row, round_word, round_index, words)


def guard_check(slot, row, round_word, record, *, round_index: int, words: int, impl="auto") -> None:
    """A receiver: keep the first mismatch of slot against row's expected header in record."""
    if resolve_impl(impl, slot) == "triton":
        _launch(slot, row, round_word, record, round_index, words, check=True)
    else:
        guard_check_torch(slot, row, round_word, record, round_index, words)
