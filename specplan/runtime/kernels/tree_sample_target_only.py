"""Tree speculative sampling, SGLang's ``tree_speculative_sampling_target_only`` semantics.

Tree encoding as in ``verify_tree_greedy``; probabilities are per node row:
``target_probs[b, i]`` / ``draft_probs[b, i]`` are the [V] distributions after node i
(target-only sampling passes zeros as draft_probs). Coins are inputs:
``uniform_samples [bs, N]`` float32 and ``uniform_samples_for_final_sampling [bs]`` float32.

Walk, per row: ``coin = u[b, 0]``, node = root. For depth j = 1 .. S-1 (S =
num_speculative_tokens) scan the node's children in sibling order with ``prob_acc = 0``
(fp32): ``p = target_probs[b, node, candidates[b, child]]``, ``prob_acc += p``; accept iff
``p > 0 and (coin < prob_acc / threshold_acc or p >= threshold_single)``. On accept:
``predicts[last] = token``, append the child's flat id to ``accept_index``, descend,
``coin = u[b, child]``. A rejected child's token is removed from the node's residual (SGLang
writes ``draft_probs[node, token] = target_probs[node, token]``; here the inputs are left
untouched). No accepted child ends the walk.

Final token at the last accepted node: with all S-1 drafts accepted, sample from
``target_probs[b, node]``; otherwise from ``relu(target - draft)`` of that row with the
rejected children's tokens zeroed. If that residual has no mass, the target row is used.
Draw: inverse CDF in fp64, the smallest token whose cumulative mass exceeds
``coin_final * total`` (the last token with mass if rounding leaves none). ``predicts[last]``
is the drawn token. Outputs as ``verify_tree_greedy``: predicts [bs*N] int32 (0 off the
path), accept_index [bs, S] int32 (-1 padded), accept_token_num [bs] int32.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl
from specplan.runtime.kernels.verify_tree_greedy import check_tree_inputs, tree_outputs, walk_start_jit


def _walk_torch(cand, ridx, nxt, sib, coins, target, num_spec, thr_single, thr_acc, outs):
    """The accept walk, vectorised over rows; returns the last node and its coin state."""
    predicts, accept_index, accept_num = outs
    bs, n = cand.shape
    rows = torch.arange(bs, device=cand.device)
    last, node = ridx[:, 0].clone(), torch.zeros(bs, dtype=torch.int64, device=cand.device)
    coin, active = coins[:, 0].clone(), torch.ones(bs, dtype=torch.bool, device=cand.device)
    accept_index[:, 0] = last.to(torch.int32)
    for j in range(1, num_spec):
        cur = torch.where(active, nxt[rows, node], -1)
        prob_acc = torch.zeros(bs, dtype=torch.float32, device=cand.device)
        taken = torch.zeros(bs, dtype=torch.bool, device=cand.device)
        for _ in range(n):
            live = (cur >= 0) & ~taken
            if not bool(live.any()):
                break
            p = target[rows, node, cand[rows, cur.clamp_min(0)]]
            prob_acc = torch.where(live, prob_acc + p, prob_acc)
            ok = live & (p > 0) & ((coin < prob_acc / thr_acc) | (p >= thr_single))
            taken |= ok
            cur = torch.where(live & ~ok, sib[rows, cur.clamp_min(0)], cur)
        predicts[last[taken]] = cand[rows, cur.clamp_min(0)][taken].to(torch.int32)
        node = torch.where(taken, cur, node)
        last = torch.where(taken, ridx[rows, node], last)
        coin = torch.where(taken, coins[rows, node], coin)
        accept_index[taken, j] = last[taken].to(torch.int32)
        accept_num += taken.to(torch.int32)
        active = taken
    return node, last


def _draw_torch(residual, coin_final):
    """Smallest token whose fp64 cumulative mass exceeds coin * total (else the last with mass)."""
    vocab = torch.arange(residual.shape[1], device=residual.device)
    mass = residual.to(torch.float64)
    cdf = mass.cumsum(dim=1)
    hit = cdf > coin_final.to(torch.float64)[:, None] * mass.sum(dim=1, keepdim=True)
    first = torch.where(hit, vocab, residual.shape[1]).min(dim=1).values
    last_mass = torch.where(mass > 0, vocab, -1).max(dim=1).values.clamp_min(0)
    return torch.where(first < residual.shape[1], first, last_mass)


def _sample_torch(outs, candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                  uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
                  num_speculative_tokens, threshold_single, threshold_acc):
    """The pure-torch walk and final draw, filling ``outs`` (a batch of one row or more)."""
    bs, n = candidates.shape
    node, last = _walk_torch(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                             uniform_samples, target_probs, num_speculative_tokens,
                             threshold_single, threshold_acc, outs)
    rows = torch.arange(bs, device=candidates.device)
    target_row = target_probs[rows, node]
    residual = (target_row - draft_probs[rows, node]).clamp_min(0.0)
    cur = retrieve_next_token[rows, node]
    for _ in range(n):  # zero every (rejected) child token of the last node
        live = cur >= 0
        residual[rows[live], candidates[rows[live], cur[live]]] = 0.0
        cur = torch.where(live, retrieve_next_sibling[rows, cur.clamp_min(0)], cur)
    all_accepted = outs[2] == num_speculative_tokens - 1
    use_target = all_accepted | (residual.to(torch.float64).sum(dim=1) <= 0)
    residual = torch.where(use_target[:, None], target_row, residual)
    outs[0][last] = _draw_torch(residual, uniform_samples_for_final_sampling).to(torch.int32)


@functools.cache
def _kernel():
    # The helpers are called from the kernel, so they must be module globals: the Triton
    # interpreter resolves a kernel's callees in its globals, not in this closure.
    global residual_tile, walk, walk_start
    import triton
    import triton.language as tl

    walk_start = walk_start_jit()  # the prologue verify_tree_greedy's kernel shares

    @triton.jit
    def residual_tile(t, dprob_row, cand_ptr, sib_ptr, row, first_child, offs, m):
        r = tl.maximum(t - tl.load(dprob_row + offs, mask=m, other=0.0), 0.0)
        child = first_child
        while child >= 0:
            r = tl.where(offs == tl.load(cand_ptr + row + child), 0.0, r)
            child = tl.load(sib_ptr + row + child)
        return r

    @triton.jit
    def walk(cand_ptr, ridx_ptr, next_ptr, sib_ptr, coin_ptr, tprob_ptr, pred_ptr, acc_idx_ptr,
             b, N, V, NUM_SPEC, thr_single, thr_acc):
        row, last, node, num, active = walk_start(ridx_ptr, acc_idx_ptr, b, N, NUM_SPEC)
        coin = tl.load(coin_ptr + row)
        for j in range(1, NUM_SPEC):
            if active:
                cur = tl.load(next_ptr + row + node)
                prob_acc = coin * 0.0
                searching = cur >= 0
                while searching:
                    p = tl.load(tprob_ptr + (row + node) * V + tl.load(cand_ptr + row + cur))
                    prob_acc += p
                    if (p > 0) & ((coin < tl.math.div_rn(prob_acc, thr_acc)) | (p >= thr_single)):
                        searching = cur < 0
                    else:
                        cur = tl.load(sib_ptr + row + cur)
                        searching = cur >= 0
                if cur >= 0:
                    tl.store(pred_ptr + last, tl.load(cand_ptr + row + cur).to(tl.int32))
                    node = cur
                    last = tl.load(ridx_ptr + row + cur)
                    coin = tl.load(coin_ptr + row + cur)
                    num += 1
                    tl.store(acc_idx_ptr + b * NUM_SPEC + j, last.to(tl.int32))
                else:
                    active = num < 0
        return node, last, num

    @triton.jit
    def tree_sample_kernel(cand_ptr, ridx_ptr, next_ptr, sib_ptr, coin_ptr, final_ptr,
                           tprob_ptr, dprob_ptr, pred_ptr, acc_idx_ptr, acc_num_ptr,
                           N, V, NUM_SPEC, thr_single, thr_acc, BLOCK_V: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        node, last, num = walk(cand_ptr, ridx_ptr, next_ptr, sib_ptr, coin_ptr, tprob_ptr,
                               pred_ptr, acc_idx_ptr, b, N, V, NUM_SPEC, thr_single, thr_acc)
        tl.store(acc_num_ptr + b, num)
        row = b * N
        trow = tprob_ptr + (row + node) * V
        drow = dprob_ptr + (row + node) * V
        first_child = tl.load(next_ptr + row + node)
        zero = tl.load(final_ptr + b).to(tl.float64) * 0.0
        tot_r, tot_t, last_r, last_t = zero, zero, num * 0 - 1, num * 0 - 1
        for v0 in range(0, V, BLOCK_V):  # pass 1: the masses and the last token with mass
            offs = v0 + tl.arange(0, BLOCK_V)
            m = offs < V
            t = tl.load(trow + offs, mask=m, other=0.0)
            r = residual_tile(t, drow, cand_ptr, sib_ptr, row, first_child, offs, m)
            tot_r += tl.sum(r.to(tl.float64), axis=0)
            tot_t += tl.sum(t.to(tl.float64), axis=0)
            last_r = tl.maximum(last_r, tl.max(tl.where(m & (r > 0), offs, -1), axis=0))
            last_t = tl.maximum(last_t, tl.max(tl.where(m & (t > 0), offs, -1), axis=0))
        use_t = (num == NUM_SPEC - 1) | (tot_r <= 0)
        bound = tl.load(final_ptr + b).to(tl.float64) * tl.where(use_t, tot_t, tot_r)
        running, found = zero, num * 0 - 1
        for v0 in range(0, V, BLOCK_V):  # pass 2: the inverse CDF
            offs = v0 + tl.arange(0, BLOCK_V)
            m = offs < V
            t = tl.load(trow + offs, mask=m, other=0.0)
            r = residual_tile(t, drow, cand_ptr, sib_ptr, row, first_child, offs, m)
            x = tl.where(use_t, t, r).to(tl.float64)
            cdf = tl.cumsum(x, axis=0) + running
            first = tl.min(tl.where(m & (cdf > bound), offs, V), axis=0)
            found = tl.where((found < 0) & (first < V), first, found)
            running += tl.sum(x, axis=0)
        fallback = tl.maximum(tl.where(use_t, last_t, last_r), 0)
        tl.store(pred_ptr + last, tl.where(found >= 0, found, fallback).to(tl.int32))

    return tree_sample_kernel


def _sample_triton(outs, candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                   uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
                   num_speculative_tokens, threshold_single, threshold_acc):
    """The Triton kernel, one program per row: walk, then two passes over the vocabulary."""
    bs, n = candidates.shape
    vocab = target_probs.shape[-1]
    _kernel()[(bs,)](
        candidates.contiguous(), retrieve_index.contiguous(), retrieve_next_token.contiguous(),
        retrieve_next_sibling.contiguous(), uniform_samples.contiguous(),
        uniform_samples_for_final_sampling.contiguous(), target_probs.contiguous(),
        draft_probs.contiguous(), *outs, n, vocab, num_speculative_tokens,
        float(threshold_single), float(threshold_acc), BLOCK_V=min(next_pow2(vocab), 4096),
    )


def tree_sample_target_only(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                            uniform_samples, uniform_samples_for_final_sampling, target_probs,
                            draft_probs, num_speculative_tokens: int, *, threshold_single=1.0,
                            threshold_acc=1.0, impl="auto"):
    """Sample along the draft tree against the target; coins are inputs (module docstring).

    Args:
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling: [bs, N] int64.
        uniform_samples: [bs, N] float32; uniform_samples_for_final_sampling: [bs] float32.
        target_probs, draft_probs: [bs, N, V] float32 (draft_probs zeros: target-only).
        num_speculative_tokens: width of accept_index, root included.
        threshold_single, threshold_acc: SGLang's acceptance thresholds (1.0: exact sampling).
        impl: "auto" | "triton" | "torch".

    Returns: the outputs of :func:`verify_tree_greedy`, filled by sampling.
    """
    check_tree_inputs(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                      uniform_samples)
    if target_probs.shape[:2] != candidates.shape or draft_probs.shape != target_probs.shape:
        raise ValueError("target_probs and draft_probs must both be [bs, N, V]")
    outs = tree_outputs(candidates, num_speculative_tokens)
    if candidates.shape[0]:
        triton = resolve_impl(impl, candidates, target_probs) == "triton"
        (_sample_triton if triton else _sample_torch)(
            outs, candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
            uniform_samples, uniform_samples_for_final_sampling, target_probs, draft_probs,
            num_speculative_tokens, threshold_single, threshold_acc)
    return outs


tree_sample_target_only_torch = functools.partial(tree_sample_target_only, impl="torch")
tree_sample_target_only_torch.__doc__ = "Pure-torch reference of :func:`tree_sample_target_only`."
