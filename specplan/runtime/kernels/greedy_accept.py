"""Greedy chain accept: the longest prefix of drafts that equals the target's argmax.

Semantics (vLLM's greedy rejection output, SGLang/DFlash's correct_len + bonus):
row b has ``n = num_draft_tokens[b]`` drafts (all S when None). Draft j is accepted while
``draft_tokens[b, j] == target_argmax[b, j]`` for every j' <= j and j < n; ``correct_len[b]``
counts the accepted drafts. ``output_tokens[b]`` holds ``target_argmax[b, :correct_len + 1]``
then -1, so column correct_len holds the recovered token (a mismatch) or the bonus (all n
accepted); ``bonus[b] = target_argmax[b, correct_len[b]]`` is the token committed after the
accepted drafts either way.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl


def greedy_accept_torch(draft_tokens, target_argmax, num_draft_tokens=None):
    """Pure-torch reference of :func:`greedy_accept` (same arguments, same outputs)."""
    bs, s = draft_tokens.shape
    cols = torch.arange(s, device=draft_tokens.device)
    match = draft_tokens == target_argmax[:, :s]
    if num_draft_tokens is not None:
        match &= cols[None, :] < num_draft_tokens[:, None].to(torch.int64)
    correct_len = match.to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    bonus = target_argmax.gather(1, correct_len.to(torch.int64)[:, None]).squeeze(1)
    out_cols = torch.arange(s + 1, device=draft_tokens.device)
    keep = out_cols[None, :] <= correct_len[:, None]
    output_tokens = torch.where(keep, target_argmax, torch.full_like(target_argmax, -1))
    return output_tokens, correct_len, bonus


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def greedy_accept_kernel(draft_ptr, argmax_ptr, num_ptr, out_ptr, len_ptr, bonus_ptr,
                             S, HAS_NUM: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        n = S
        if HAS_NUM:
            n = tl.load(num_ptr + row).to(tl.int32)
        target = tl.load(argmax_ptr + row * (S + 1) + cols, mask=cols <= S, other=-1)
        draft = tl.load(draft_ptr + row * S + cols, mask=cols < S, other=-1)
        # The first mismatch or the first column past the drafts ends the accepted prefix.
        stop = (draft != target) | (cols >= n)
        correct_len = tl.min(tl.where(stop, cols, BLOCK), axis=0)
        out = tl.where(cols <= correct_len, target, -1)
        tl.store(out_ptr + row * (S + 1) + cols, out, mask=cols <= S)
        tl.store(len_ptr + row, correct_len.to(tl.int32))
        bonus = tl.sum(tl.where(cols == correct_len, target, 0), axis=0)
        tl.store(bonus_ptr + row, bonus.to(tl.int64))

    return greedy_accept_kernel


def greedy_accept_triton(draft_tokens, target_argmax, num_draft_tokens=None):
    """Triton implementation of :func:`greedy_accept`: one program per row."""
    bs, s = draft_tokens.shape
    device = draft_tokens.device
    output_tokens = torch.empty((bs, s + 1), dtype=torch.int64, device=device)
    correct_len = torch.empty((bs,), dtype=torch.int32, device=device)
    bonus = torch.empty((bs,), dtype=torch.int64, device=device)
    if bs == 0:
        return output_tokens, correct_len, bonus
    has_num = num_draft_tokens is not None
    num = num_draft_tokens.contiguous() if has_num else correct_len
    _kernel()[(bs,)](
        draft_tokens.contiguous(), target_argmax.contiguous(), num, output_tokens, correct_len,
        bonus, s, HAS_NUM=has_num, BLOCK=next_pow2(s + 1),
    )
    return output_tokens, correct_len, bonus


def _check(draft_tokens, target_argmax, num_draft_tokens):
    if draft_tokens.dim() != 2 or target_argmax.dim() != 2:
        raise ValueError("draft_tokens and target_argmax must be 2-D [bs, S] and [bs, S+1]")
    bs, s = draft_tokens.shape
    if tuple(target_argmax.shape) != (bs, s + 1):
        raise ValueError(f"target_argmax must be [{bs}, {s + 1}], found {list(target_argmax.shape)}")
    if num_draft_tokens is not None and tuple(num_draft_tokens.shape) != (bs,):
        raise ValueError(f"num_draft_tokens must be [{bs}], found {list(num_draft_tokens.shape)}")


def greedy_accept(draft_tokens, target_argmax, num_draft_tokens=None, *, impl="auto"):
    """Accept the longest draft prefix equal to the target argmax.

    Args:
        draft_tokens: [bs, S] int64 drafts.
        target_argmax: [bs, S+1] int64 target argmax after each verified position.
        num_draft_tokens: [bs] int32 drafts per row (ragged), or None for S everywhere.
        impl: "auto" | "triton" | "torch" (see ``_dispatch``).

    Returns:
        output_tokens [bs, S+1] int64 (target_argmax up to and including column correct_len,
        then -1), correct_len [bs] int32, bonus [bs] int64 (= target_argmax[b, correct_len]).
    """
    _check(draft_tokens, target_argmax, num_draft_tokens)
    if resolve_impl(impl, draft_tokens, target_argmax) == "triton":
        return greedy_accept_triton(draft_tokens, target_argmax, num_draft_tokens)
    return greedy_accept_torch(draft_tokens, target_argmax, num_draft_tokens)
