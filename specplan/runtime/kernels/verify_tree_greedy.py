"""Greedy tree verify with SGLang's ``verify_tree_greedy`` semantics, element for element.

The tree of row b is encoded by ``build_tree``: node 0 is the root (the previous bonus
token), ``retrieve_next_token[b, i]`` is the first child of node i (local index, -1 none),
``retrieve_next_sibling[b, i]`` its next sibling, ``retrieve_index[b, i]`` the node's flat id
(``b * N + i``). ``target_predict`` is read at flat ids: ``target_predict.view(-1)[last]`` is
the target's argmax after node ``last``.

Walk, per row: ``last = retrieve_index[b, 0]``; for depth j = 1 .. num_speculative_tokens - 1,
scan the children of the last accepted node in sibling order for the first whose candidate
equals ``target_predict[last]``; on a match write ``predicts[last] = target_predict[last]``,
append its flat id to ``accept_index`` and descend; with no match stop. Finally
``predicts[last] = target_predict[last]`` (the bonus). ``predicts`` is 0 off the accepted path,
``accept_index`` is -1 padded, ``accept_token_num`` counts accepted drafts (not the root).
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import resolve_impl


def tree_outputs(candidates, num_spec):
    """A tree kernel's outputs as an empty walk leaves them: predicts [bs*N] 0, accept_index
    [bs, num_spec] -1, accept_token_num [bs] 0 (int32, on the candidates' device)."""
    bs, n = candidates.shape
    device = candidates.device
    predicts = torch.zeros((bs * n,), dtype=torch.int32, device=device)
    accept_index = torch.full((bs, num_spec), -1, dtype=torch.int32, device=device)
    accept_token_num = torch.zeros((bs,), dtype=torch.int32, device=device)
    return predicts, accept_index, accept_token_num


def first_matching_child(first, want, candidates, next_sibling):
    """Per row, walk the sibling list from ``first`` to the first node whose candidate is ``want``.

    Returns the local node index, or -1 when no sibling matches (or ``first`` is -1).
    Shared by the tree references; vectorised over rows, at most N steps.
    """
    cur = first.clone()
    for _ in range(candidates.shape[1]):
        safe = cur.clamp_min(0)[:, None]
        miss = (cur >= 0) & (candidates.gather(1, safe).squeeze(1) != want)
        if not bool(miss.any()):
            break
        cur = torch.where(miss, next_sibling.gather(1, safe).squeeze(1), cur)
    return cur


def _walk_torch(outs, candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                target_predict, num_speculative_tokens):
    """The pure-torch walk, vectorised over rows, filling ``outs`` (a batch of one row or more)."""
    predicts, accept_index, accept_num = outs
    bs = candidates.shape[0]
    flat_target = target_predict.reshape(-1)
    last = retrieve_index[:, 0].clone()
    accept_index[:, 0] = last.to(torch.int32)
    node = torch.zeros(bs, dtype=torch.int64, device=candidates.device)
    active = torch.ones(bs, dtype=torch.bool, device=candidates.device)
    for j in range(1, num_speculative_tokens):
        first = torch.where(active, retrieve_next_token.gather(1, node[:, None]).squeeze(1), -1)
        want = flat_target[last]
        cur = first_matching_child(first, want, candidates, retrieve_next_sibling)
        found = active & (cur >= 0)
        predicts[last[found]] = want[found].to(torch.int32)
        node = torch.where(found, cur, node)
        last = torch.where(found, retrieve_index.gather(1, node[:, None]).squeeze(1), last)
        accept_index[found, j] = last[found].to(torch.int32)
        accept_num += found.to(torch.int32)
        active = found
    predicts[last] = flat_target[last].to(torch.int32)


@functools.cache
def walk_start_jit():
    """The tree walks' prologue, a @triton.jit helper both tree kernels call: row b starts at
    its root (`last`, written as accept_index[b, 0]), node 0, no draft accepted, active.
    A caller binds it to a module global of its own: the Triton interpreter resolves a
    kernel's callees in the kernel's globals, not in a closure; and it looks for
    triton.language among a jit function's module globals, so `tl` is one here."""
    global tl
    import triton
    import triton.language as tl

    @triton.jit
    def walk_start(ridx_ptr, acc_idx_ptr, b, N, NUM_SPEC):
        row = b * N
        last = tl.load(ridx_ptr + row)
        tl.store(acc_idx_ptr + b * NUM_SPEC, last.to(tl.int32))
        num = (b * 0).to(tl.int32)
        return row, last, b * 0, num, num == 0

    return walk_start


@functools.cache
def _kernel():
    global walk_start  # a callee of the kernel: a module global (walk_start_jit)
    import triton
    import triton.language as tl

    walk_start = walk_start_jit()

    @triton.jit
    def verify_tree_greedy_kernel(cand_ptr, ridx_ptr, next_ptr, sib_ptr, target_ptr,
                                  pred_ptr, acc_idx_ptr, acc_num_ptr, N, NUM_SPEC):
        b = tl.program_id(0).to(tl.int64)
        row, last, node, num, active = walk_start(ridx_ptr, acc_idx_ptr, b, N, NUM_SPEC)
        for j in range(1, NUM_SPEC):
            if active:
                cur = tl.load(next_ptr + row + node)
                want = tl.load(target_ptr + last)
                searching = cur >= 0
                while searching:
                    if tl.load(cand_ptr + row + cur) == want:
                        searching = cur < 0
                    else:
                        cur = tl.load(sib_ptr + row + cur)
                        searching = cur >= 0
                if cur >= 0:
                    tl.store(pred_ptr + last, want.to(tl.int32))
                    node = cur
                    last = tl.load(ridx_ptr + row + cur)
                    num += 1
                    tl.store(acc_idx_ptr + b * NUM_SPEC + j, last.to(tl.int32))
                else:
                    active = num < 0
        tl.store(acc_num_ptr + b, num)
        tl.store(pred_ptr + last, tl.load(target_ptr + last).to(tl.int32))

    return verify_tree_greedy_kernel


def _walk_triton(outs, candidates, *tensors_and_width):
    """The Triton walk, one program per row, filling ``outs``."""
    *tensors, num_speculative_tokens = tensors_and_width
    bs, n = candidates.shape
    _kernel()[(bs,)](candidates.contiguous(), *(t.contiguous() for t in tensors), *outs, n,
                     num_speculative_tokens)


def check_tree_inputs(candidates, *others):
    """Raise ValueError unless every tree tensor is [bs, N] like ``candidates``."""
    if candidates.dim() != 2:
        raise ValueError(f"candidates must be [bs, N], found {list(candidates.shape)}")
    for t in others:
        if t.shape != candidates.shape:
            raise ValueError(f"tree tensors must all be {list(candidates.shape)}, found {list(t.shape)}")


def verify_tree_greedy(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                       target_predict, num_speculative_tokens: int, *, impl="auto"):
    """Accept the longest root path of the draft tree that the target's argmax agrees with.

    Args:
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
        target_predict: [bs, N] int64 (see the module docstring).
        num_speculative_tokens: width of accept_index, the root included.
        impl: "auto" | "triton" | "torch".

    Returns:
        predicts [bs*N] int32, accept_index [bs, num_speculative_tokens] int32,
        accept_token_num [bs] int32.
    """
    check_tree_inputs(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
                      target_predict)
    if num_speculative_tokens < 1:
        raise ValueError(f"num_speculative_tokens must be >= 1, found {num_speculative_tokens}")
    outs = tree_outputs(candidates, num_speculative_tokens)
    if candidates.shape[0]:
        walk = _walk_triton if resolve_impl(impl, candidates, target_predict) == "triton" else _walk_torch
        walk(outs, candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
             target_predict, num_speculative_tokens)
    return outs


verify_tree_greedy_torch = functools.partial(verify_tree_greedy, impl="torch")
verify_tree_greedy_torch.__doc__ = "Pure-torch reference of :func:`verify_tree_greedy`."
