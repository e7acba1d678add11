"""Finalize an accepted chain: commit lengths, new sequence lengths, cap trims and out tokens.

Semantics (DSpark's FinalizeAcceptLens + BuildOutTokens, DFlash's _commit_accept), per row b
with ``c = correct_len[b]`` accepted drafts out of gamma:

- ``commit_lens = c + 1`` (the drafts plus the bonus), int32;
- ``new_seq_lens = prefix_lens + commit_lens``, int32;
- ``cap_trim_lens = c - min(c, verify_lens - 1)``, int32: the accepted drafts past a row's
  verify window (0 when ``verify_lens`` is None, i.e. every row verified all gamma drafts);
- ``out_tokens [bs, gamma + 1]`` int64: ``draft_tokens`` in columns 0 .. gamma-1, 0 in column
  gamma, then ``bonus`` scattered at column c. Columns past c keep the rejected drafts (and the
  0), as DSpark does: consumers read only the first ``commit_lens`` columns.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl


def finalize_accept_torch(correct_len, bonus, prefix_lens, draft_tokens, verify_lens=None):
    """Pure-torch reference of :func:`finalize_accept`."""
    commit_lens = (correct_len + 1).to(torch.int32)
    new_seq_lens = (prefix_lens + commit_lens).to(torch.int32)
    if verify_lens is None:
        cap_trim_lens = torch.zeros_like(commit_lens)
    else:
        cap_trim_lens = (correct_len - torch.minimum(correct_len, verify_lens - 1)).to(torch.int32)
    bs = draft_tokens.shape[0]
    out_tokens = torch.cat(
        [draft_tokens, torch.zeros((bs, 1), dtype=torch.int64, device=draft_tokens.device)], dim=1
    )
    out_tokens.scatter_(1, correct_len.to(torch.int64)[:, None], bonus.to(torch.int64)[:, None])
    return commit_lens, new_seq_lens, cap_trim_lens, out_tokens


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def finalize_accept_kernel(len_ptr, bonus_ptr, prefix_ptr, draft_ptr, verify_ptr,
                               commit_ptr, seq_ptr, trim_ptr, out_ptr, GAMMA,
                               HAS_VERIFY: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        c = tl.load(len_ptr + b)
        commit = c + 1
        tl.store(commit_ptr + b, commit)
        tl.store(seq_ptr + b, tl.load(prefix_ptr + b) + commit)
        trim = c * 0
        if HAS_VERIFY:
            trim = c - tl.minimum(c, tl.load(verify_ptr + b) - 1)
        tl.store(trim_ptr + b, trim)
        cols = tl.arange(0, BLOCK)
        drafts = tl.load(draft_ptr + b * GAMMA + cols, mask=cols < GAMMA, other=0)
        out = tl.where(cols == c, tl.load(bonus_ptr + b), drafts)
        tl.store(out_ptr + b * (GAMMA + 1) + cols, out, mask=cols <= GAMMA)

    return finalize_accept_kernel


def finalize_accept_triton(correct_len, bonus, prefix_lens, draft_tokens, verify_lens=None):
    """Triton implementation of :func:`finalize_accept`: one program per row."""
    bs, gamma = draft_tokens.shape
    device = draft_tokens.device
    commit_lens = torch.empty((bs,), dtype=torch.int32, device=device)
    new_seq_lens = torch.empty_like(commit_lens)
    cap_trim_lens = torch.empty_like(commit_lens)
    out_tokens = torch.empty((bs, gamma + 1), dtype=torch.int64, device=device)
    if bs == 0:
        return commit_lens, new_seq_lens, cap_trim_lens, out_tokens
    has_verify = verify_lens is not None
    _kernel()[(bs,)](
        correct_len.to(torch.int32).contiguous(), bonus.contiguous(),
        prefix_lens.to(torch.int32).contiguous(), draft_tokens.contiguous(),
        verify_lens.to(torch.int32).contiguous() if has_verify else commit_lens,
        commit_lens, new_seq_lens, cap_trim_lens, out_tokens, gamma,
        HAS_VERIFY=has_verify, BLOCK=next_pow2(gamma + 1),
    )
    return commit_lens, new_seq_lens, cap_trim_lens, out_tokens


def finalize_accept(correct_len, bonus, prefix_lens, draft_tokens, verify_lens=None, *, impl="auto"):
    """Derive what a round commits from the converged (correct_len, bonus).

    Args:
        correct_len: [bs] int32 accepted drafts; bonus: [bs] int64 token after them.
        prefix_lens: [bs] int32 sequence lengths before the round.
        draft_tokens: [bs, gamma] int64 drafts of the round.
        verify_lens: [bs] int32 verified window per row (drafts + 1), or None.
        impl: "auto" | "triton" | "torch".

    Returns:
        commit_lens, new_seq_lens, cap_trim_lens ([bs] int32 each), out_tokens [bs, gamma+1] int64.
    """
    bs = draft_tokens.shape[0]
    for name, t in (("correct_len", correct_len), ("bonus", bonus), ("prefix_lens", prefix_lens)):
        if tuple(t.shape) != (bs,):
            raise ValueError(f"{name} must be [{bs}], found {list(t.shape)}")
    if resolve_impl(impl, draft_tokens, correct_len) == "triton":
        return finalize_accept_triton(correct_len, bonus, prefix_lens, draft_tokens, verify_lens)
    return finalize_accept_torch(correct_len, bonus, prefix_lens, draft_tokens, verify_lens)
