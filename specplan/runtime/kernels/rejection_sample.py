"""Chain rejection sampling over ragged batches, with vLLM's V1 semantics.

Requests are concatenated: request b owns the ``n_b = num_draft_tokens[b]`` token rows
``start_b .. start_b + n_b`` of ``draft_token_ids``, ``draft_probs``, ``target_probs`` and
``uniform``. Output row b is ``[max_spec_len + 1]`` int64, -1 padded.

- Greedy rows (``is_greedy[b]``): position j emits ``argmax(target_probs[start_b + j])``
  (ties to the lowest id) and stops after the first draft that differs from it.
- Random rows: draft x at position j is accepted iff ``0 <= x < V``, ``q = draft_probs[.., x] > 0``
  (q = 1 without draft probabilities, the n-gram case) and ``p / q >= u[j]`` with
  ``p = target_probs[.., x]`` (the ratio is fp32, compared in fp64 with the fp64 uniform).
  The first rejected position emits the recovered token
  ``argmax(max(p_vec - q_vec, 0) * exp_noise[b].reciprocal())`` (without draft probabilities:
  ``p_vec`` with the draft token zeroed), the Gumbel-max trick on the residual; ties go to the
  lowest id. The score is a product with the reciprocal, as vLLM computes it (0.33.0
  v1/sample/rejection_sampler.py ``sample_recovered_tokens``: ``inv_q = q.reciprocal()``, then
  ``prob * inv_q`` in ``sample_recovered_tokens_kernel``), not a quotient: the two differ by an
  ulp and recover different tokens on such a tie.
- A row whose n_b drafts are all accepted emits ``bonus_token_ids[b]`` at column n_b; a
  request with 0 drafts emits only its bonus.

Randomness is an input: ``uniform`` [T] float64 and ``exp_noise`` [bs, V] float32 (one Exp(1)
row per request, shared by its positions), so every rank given the same inputs agrees.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl


def _layout(num_draft_tokens):
    """Per-token request index, position in request and per-request start offset."""
    n = num_draft_tokens.to(torch.int64)
    starts = torch.cumsum(n, 0) - n
    req = torch.repeat_interleave(torch.arange(n.numel(), device=n.device), n)
    pos = torch.arange(req.numel(), device=n.device) - starts[req]
    return req, pos, starts


def _recovered_torch(draft_ids, draft_probs, target_probs, exp_noise, greedy_tok, req):
    """Argmax of target (greedy tokens) or of the residual times the noise's reciprocal."""
    vocab = torch.arange(target_probs.shape[1], device=target_probs.device)
    if draft_probs is None:
        prob = torch.where(vocab[None, :] == draft_ids[:, None], 0.0, target_probs)
    else:
        prob = (target_probs - draft_probs).clamp_min(0.0)
    score = torch.where(greedy_tok[:, None], target_probs, prob * exp_noise.reciprocal()[req])
    return score.argmax(dim=1)


def _accepted_torch(draft_ids, draft_probs, target_probs, uniform, recovered, greedy_tok):
    vocab_size = target_probs.shape[1]
    in_vocab = (draft_ids >= 0) & (draft_ids < vocab_size)
    idx = draft_ids.clamp(0, vocab_size - 1)[:, None]
    p = target_probs.gather(1, idx).squeeze(1)
    q = torch.ones_like(p) if draft_probs is None else draft_probs.gather(1, idx).squeeze(1)
    accept_random = in_vocab & (q > 0) & ((p / q).to(torch.float64) >= uniform)
    return torch.where(greedy_tok, draft_ids == recovered, accept_random)


def rejection_sample_torch(draft_token_ids, num_draft_tokens, draft_probs, target_probs,
                           bonus_token_ids, uniform, exp_noise, is_greedy, max_spec_len):
    """Pure-torch reference of :func:`rejection_sample` (max_spec_len already resolved)."""
    bs = num_draft_tokens.numel()
    device = target_probs.device
    out = torch.full((bs, max_spec_len + 1), -1, dtype=torch.int64, device=device)
    req, pos, _ = _layout(num_draft_tokens)
    greedy = is_greedy if is_greedy is not None else torch.zeros(bs, dtype=torch.bool, device=device)
    greedy_tok = greedy[req]
    rec = _recovered_torch(draft_token_ids, draft_probs, target_probs, exp_noise, greedy_tok, req)
    acc = _accepted_torch(draft_token_ids, draft_probs, target_probs, uniform, rec, greedy_tok)
    accepted = torch.zeros((bs, max_spec_len + 1), dtype=torch.bool, device=device)
    accepted[req, pos] = acc
    n_acc = accepted.to(torch.int32).cumprod(dim=1).sum(dim=1).to(torch.int64)
    n = num_draft_tokens.to(torch.int64)
    token_grid = torch.full_like(out, -1)
    token_grid[req, pos] = torch.where(acc, draft_token_ids, rec)
    cols = torch.arange(max_spec_len + 1, device=device)[None, :]
    out = torch.where(cols <= n_acc[:, None], token_grid, out)
    rows = torch.arange(bs, device=device)
    all_ok = n_acc == n
    out[rows[all_ok], n[all_ok]] = bonus_token_ids[all_ok]
    return out


@functools.cache
def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def recovered_kernel(draft_ptr, num_ptr, start_ptr, dprob_ptr, tprob_ptr, inv_noise_ptr,
                         greedy_ptr, rec_ptr, V, HAS_DRAFT: tl.constexpr,
                         HAS_GREEDY: tl.constexpr, BLOCK_V: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        pos = tl.program_id(1)
        if pos < tl.load(num_ptr + b):
            tok = tl.load(start_ptr + b) + pos
            draft = tl.load(draft_ptr + tok)
            if HAS_GREEDY:
                greedy = tl.load(greedy_ptr + b)
            best_val = (b * 0).to(tl.float32) - 1.0
            best_idx = (b * 0).to(tl.int32)
            for v0 in range(0, V, BLOCK_V):
                offs = v0 + tl.arange(0, BLOCK_V)
                m = offs < V
                p = tl.load(tprob_ptr + tok * V + offs, mask=m, other=0.0)
                # Greedy rows read neither the draft row nor the noise.
                use_noise = m
                if HAS_GREEDY:
                    # Broadcast the flag first: the interpreter rejects scalar & vector masks.
                    use_noise = m & ((offs * 0 + greedy) == 0)
                if HAS_DRAFT:
                    q = tl.load(dprob_ptr + tok * V + offs, mask=use_noise, other=0.0)
                    prob = tl.maximum(p - q, 0.0)
                else:
                    prob = tl.where(offs == draft, 0.0, p)
                inv = tl.load(inv_noise_ptr + b * V + offs, mask=use_noise, other=1.0)
                score = prob * inv
                if HAS_GREEDY:
                    score = tl.where(greedy != 0, p, score)
                score = tl.where(m, score, float("-inf"))
                tile_max = tl.max(score, axis=0)
                tile_idx = tl.argmax(score, axis=0, tie_break_left=True).to(tl.int32)
                # Strictly greater keeps the earliest tile on ties: the lowest id wins.
                better = tile_max > best_val
                best_idx = tl.where(better, v0 + tile_idx, best_idx)
                best_val = tl.where(better, tile_max, best_val)
            tl.store(rec_ptr + tok, best_idx.to(tl.int64))

    @triton.jit
    def accept_kernel(draft_ptr, num_ptr, start_ptr, dprob_ptr, tprob_ptr, uniform_ptr,
                      greedy_ptr, rec_ptr, bonus_ptr, out_ptr, V, OUT_W,
                      HAS_DRAFT: tl.constexpr, HAS_GREEDY: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        n = tl.load(num_ptr + b)
        start = tl.load(start_ptr + b)
        pos = tl.arange(0, BLOCK)
        valid = pos < n
        tok = start + pos
        draft = tl.load(draft_ptr + tok, mask=valid, other=-1)
        rec = tl.load(rec_ptr + tok, mask=valid, other=-1)
        in_vocab = (draft >= 0) & (draft < V)
        p = tl.load(tprob_ptr + tok * V + draft, mask=valid & in_vocab, other=0.0)
        if HAS_DRAFT:
            q = tl.load(dprob_ptr + tok * V + draft, mask=valid & in_vocab, other=0.0)
        else:
            q = tl.where(valid, 1.0, 0.0)
        u = tl.load(uniform_ptr + tok, mask=valid, other=1.0)
        ratio = tl.math.div_rn(p, tl.where(q > 0, q, 1.0)).to(tl.float64)
        accept = in_vocab & (q > 0) & (ratio >= u)
        if HAS_GREEDY:
            accept = tl.where(tl.load(greedy_ptr + b) != 0, draft == rec, accept)
        stop = (~accept) | (~valid)
        n_acc = tl.min(tl.where(stop, pos, BLOCK), axis=0)
        bonus = tl.load(bonus_ptr + b)
        tail = tl.where(n_acc == n, bonus, rec)
        out = tl.where(pos < n_acc, draft, tl.where(pos == n_acc, tail, -1))
        tl.store(out_ptr + b * OUT_W + pos, out, mask=pos < OUT_W)

    return recovered_kernel, accept_kernel


def rejection_sample_triton(draft_token_ids, num_draft_tokens, draft_probs, target_probs,
                            bonus_token_ids, uniform, exp_noise, is_greedy, max_spec_len):
    """Triton implementation: a (bs, max_spec_len) recovered-token launch, then a (bs,) walk."""
    bs = num_draft_tokens.numel()
    device = target_probs.device
    out = torch.full((bs, max_spec_len + 1), -1, dtype=torch.int64, device=device)
    total, vocab = target_probs.shape
    if bs == 0:
        return out
    _, _, starts = _layout(num_draft_tokens)
    num = num_draft_tokens.to(torch.int64).contiguous()
    rec = torch.full((max(total, 1),), -1, dtype=torch.int64, device=device)
    has_draft, has_greedy = draft_probs is not None, is_greedy is not None
    tprob = target_probs.contiguous()
    dprob = draft_probs.contiguous() if has_draft else tprob
    greedy = is_greedy.to(torch.int8).contiguous() if has_greedy else num
    drafts = draft_token_ids.contiguous() if total else rec
    recovered_kernel, accept_kernel = _kernels()
    if total and max_spec_len:
        recovered_kernel[(bs, max_spec_len)](
            drafts, num, starts, dprob, tprob, exp_noise.reciprocal().contiguous(), greedy, rec, vocab,
            HAS_DRAFT=has_draft, HAS_GREEDY=has_greedy, BLOCK_V=min(next_pow2(vocab), 4096),
        )
    accept_kernel[(bs,)](
        drafts, num, starts, dprob, tprob, uniform.contiguous() if total else out, greedy, rec,
        bonus_token_ids.contiguous(), out, vocab, max_spec_len + 1,
        HAS_DRAFT=has_draft, HAS_GREEDY=has_greedy, BLOCK=next_pow2(max_spec_len + 1),
    )
    return out


def _check(draft_token_ids, num_draft_tokens, target_probs, exp_noise, max_spec_len):
    total = draft_token_ids.numel()
    if int(num_draft_tokens.sum()) != total:
        raise ValueError(f"sum(num_draft_tokens) must equal len(draft_token_ids) = {total}")
    if target_probs.dim() != 2 or target_probs.shape[0] != total:
        raise ValueError(f"target_probs must be [{total}, V], found {list(target_probs.shape)}")
    if exp_noise.shape[0] != num_draft_tokens.numel():
        raise ValueError("exp_noise must have one row per request")
    if num_draft_tokens.numel() and int(num_draft_tokens.max()) > max_spec_len:
        raise ValueError(f"max_spec_len={max_spec_len} is below max(num_draft_tokens)")


def rejection_sample(draft_token_ids, num_draft_tokens, draft_probs, target_probs,
                     bonus_token_ids, uniform, exp_noise, is_greedy, *, max_spec_len=None,
                     impl="auto"):
    """Rejection-sample ragged draft chains against the target (vLLM V1 semantics).

    Args:
        draft_token_ids: [T] int64, the requests' drafts concatenated.
        num_draft_tokens: [bs] int32 drafts per request.
        draft_probs: [T, V] float32 draft distribution, or None (n-gram drafts).
        target_probs: [T, V] float32 target distribution at each draft position.
        bonus_token_ids: [bs] int64 token emitted after all-accepted rows.
        uniform: [T] float64 coins; exp_noise: [bs, V] float32 Exp(1) noise.
        is_greedy: [bs] bool, or None for no greedy row.
        max_spec_len: output width - 1; defaults to max(num_draft_tokens) (0 for bs = 0).
        impl: "auto" | "triton" | "torch".

    Returns:
        output_tokens [bs, max_spec_len + 1] int64, -1 padded (see the module docstring).
    """
    if max_spec_len is None:
        max_spec_len = int(num_draft_tokens.max()) if num_draft_tokens.numel() else 0
    _check(draft_token_ids, num_draft_tokens, target_probs, exp_noise, max_spec_len)
    args = (draft_token_ids, num_draft_tokens, draft_probs, target_probs, bonus_token_ids,
            uniform, exp_noise, is_greedy, max_spec_len)
    if resolve_impl(impl, target_probs, draft_token_ids) == "triton":
        return rejection_sample_triton(*args)
    return rejection_sample_torch(*args)
