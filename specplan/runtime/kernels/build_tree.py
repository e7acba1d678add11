"""Build the verify tree from draft parent lists (SGLang's build_tree_kernel_efficient).

Inputs per row b: ``parent_list [bs, topk*(depth-1)+1]`` int64 (for each flattened score
slot, the slot its token was expanded from), ``selected_index [bs, N-1]`` int64 (the sorted
top-scoring slots; node i >= 1 is the token of slot ``selected_index[b, i-1]``, node 0 the
root, the previous bonus) and ``verified_seq_len [bs]``.

Parent of node i >= 1: ``t = selected_index[b, i-1] // topk``. t == 0 means the root. Otherwise
the parent slot is ``parent_list[b, t]`` and the parent node is ``p + 1`` for the first p with
``selected_index[b, p]`` equal to it. When no selected slot matches (an invalid tree, e.g.
NaN log-probs upstream) the node is an orphan: linked under nobody, its mask row holds the
root and itself and its depth is 1. (SGLang prints a warning there and reads out of bounds.)

Outputs:

- ``positions [bs*N]`` int64: ``verified_seq_len[b] + depth(i)``, depth(root) = 0;
- ``retrieve_index [bs, N]`` int64: ``b*N + i``;
- ``retrieve_next_token [bs, N]`` int64: the first child of node i (lowest index), -1 none;
- ``retrieve_next_sibling [bs, N]`` int64: the next child of the same parent, -1 none
  (children are listed in ascending index, as SGLang's backwards insertion leaves them);
- ``tree_mask [bs, N, N]`` bool (SGLang's QLEN_ONLY mode): node i attends to j iff j is i,
  an ancestor of i, or the root.

The chain (topk = 1) is the special case where node i's parent is node i - 1.
"""

from __future__ import annotations

import functools

import torch

from specplan.runtime.kernels._dispatch import next_pow2, resolve_impl


def _parents_torch(parent_list, selected_index, topk):
    """[bs, N] parent node per node: -1 for the root and orphans."""
    bs, m = selected_index.shape
    root = torch.full((bs, 1), -1, dtype=torch.int64, device=selected_index.device)
    if m == 0:
        return root
    slot = selected_index // topk
    # Slot 0 (the root's children) reads no parent: at num_steps 1 parent_list is [bs, 0].
    # A slot past parent_list is an orphan, as a slot whose parent nobody selected.
    width = parent_list.shape[1]
    parent_slot = torch.full_like(slot, -2)
    if width:
        read = parent_list.gather(1, slot.clamp(0, width - 1))
        parent_slot = torch.where((slot > 0) & (slot < width), read, parent_slot)
    eq = selected_index[:, None, :] == parent_slot[:, :, None]
    found = torch.where(eq.any(-1), eq.to(torch.int32).argmax(-1).to(torch.int64) + 1, -1)
    par = torch.where(slot == 0, 0, found)
    return torch.cat([root, par], dim=1)


def build_tree_torch(parent_list, selected_index, verified_seq_len, topk):
    """Pure-torch reference of :func:`build_tree`."""
    bs, n = selected_index.shape[0], selected_index.shape[1] + 1
    device = selected_index.device
    parent = _parents_torch(parent_list, selected_index, topk)
    nodes = torch.arange(n, device=device)
    mask = (nodes[None, :] == nodes[:, None]) | (nodes[None, :] == 0)
    mask = mask.expand(bs, n, n).clone()
    cur = nodes.expand(bs, n).clone()
    depth = torch.zeros((bs, n), dtype=torch.int64, device=device)
    for _ in range(n):
        step = cur > 0
        cur = torch.where(step, parent.gather(1, cur.clamp_min(0)), cur)
        depth += step
        mask |= cur[:, :, None] == nodes[None, None, :]
    positions = (verified_seq_len.to(torch.int64)[:, None] + depth).reshape(-1)
    retrieve_index = torch.arange(bs * n, device=device).view(bs, n)
    big = torch.full((), n, device=device)
    is_child = (parent[:, None, :] == nodes[None, :, None]) & (nodes[None, None, :] >= 1)
    next_token = torch.where(is_child, nodes, big).min(-1).values
    same_parent = (parent[:, None, :] == parent[:, :, None]) & (parent[:, :, None] >= 0)
    later = same_parent & (nodes[None, None, :] > nodes[None, :, None])
    next_sibling = torch.where(later, nodes, big).min(-1).values
    next_token = torch.where(next_token == n, -1, next_token)
    next_sibling = torch.where(next_sibling == n, -1, next_sibling)
    return positions, retrieve_index, next_token, next_sibling, mask


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def build_tree_kernel(parent_ptr, sel_ptr, seq_ptr, pos_ptr, ridx_ptr, next_ptr, sib_ptr,
                          mask_ptr, N, P, TOPK, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        i = tl.arange(0, BLOCK)
        j = tl.arange(0, BLOCK)
        m = N - 1
        node_ok = (i >= 1) & (i < N)
        sel_i = tl.load(sel_ptr + b * m + i - 1, mask=node_ok, other=0)
        slot = sel_i // TOPK
        parent_slot = tl.load(parent_ptr + b * P + slot, mask=node_ok & (slot > 0) & (slot < P),
                              other=-2)
        sel_j = tl.load(sel_ptr + b * m + j, mask=j < m, other=-3)
        eq = (sel_j[None, :] == parent_slot[:, None]) & (j[None, :] < m)
        first = tl.min(tl.where(eq, j[None, :], BLOCK), axis=1)
        par = tl.where(slot == 0, 0, tl.where(first < BLOCK, first + 1, -1))
        par = tl.where(node_ok, par, -1)
        # Walk every node to the root at once; the parent of `cur` is gathered by a one-hot sum.
        anc = (j[None, :] == i[:, None]) | (j[None, :] == 0)
        cur = i
        depth = i * 0
        for _ in range(N):
            step = cur > 0
            up = tl.sum(tl.where(cur[:, None] == j[None, :], par[None, :], 0), axis=1)
            cur = tl.where(step, up, cur)
            depth += step.to(tl.int32)
            anc = anc | (j[None, :] == cur[:, None])
        row_ok = i < N
        tl.store(pos_ptr + b * N + i, tl.load(seq_ptr + b) + depth.to(tl.int64), mask=row_ok)
        tl.store(ridx_ptr + b * N + i, b * N + i, mask=row_ok)
        child = (par[None, :] == i[:, None]) & (j[None, :] >= 1)
        nxt = tl.min(tl.where(child, j[None, :], BLOCK), axis=1)
        tl.store(next_ptr + b * N + i, tl.where(nxt < BLOCK, nxt, -1).to(tl.int64), mask=row_ok)
        later = (par[None, :] == par[:, None]) & (par[:, None] >= 0) & (j[None, :] > i[:, None])
        sib = tl.min(tl.where(later, j[None, :], BLOCK), axis=1)
        tl.store(sib_ptr + b * N + i, tl.where(sib < BLOCK, sib, -1).to(tl.int64), mask=row_ok)
        cell_ok = (i[:, None] < N) & (j[None, :] < N)
        tl.store(mask_ptr + b * N * N + i[:, None] * N + j[None, :], anc.to(tl.uint8), mask=cell_ok)

    return build_tree_kernel


def build_tree_triton(parent_list, selected_index, verified_seq_len, topk):
    """Triton implementation of :func:`build_tree`: one program per row, [N, N] tiles."""
    bs, n = selected_index.shape[0], selected_index.shape[1] + 1
    device = selected_index.device
    positions = torch.empty((bs * n,), dtype=torch.int64, device=device)
    retrieve_index = torch.empty((bs, n), dtype=torch.int64, device=device)
    next_token = torch.empty_like(retrieve_index)
    next_sibling = torch.empty_like(retrieve_index)
    mask = torch.empty((bs, n, n), dtype=torch.bool, device=device)
    if bs:
        _kernel()[(bs,)](
            parent_list.contiguous(), selected_index.contiguous(),
            verified_seq_len.to(torch.int64).contiguous(), positions, retrieve_index, next_token,
            next_sibling, mask.view(torch.uint8), n, parent_list.shape[1], topk,
            BLOCK=next_pow2(n),
        )
    return positions, retrieve_index, next_token, next_sibling, mask


def build_tree(parent_list, selected_index, verified_seq_len, topk: int, *, impl="auto"):
    """Build positions, retrieve lists and the QLEN_ONLY tree mask from the draft's choices.

    Args:
        parent_list: [bs, topk*(depth-1)+1] int64; selected_index: [bs, N-1] int64 sorted slots;
        verified_seq_len: [bs] int32/int64 committed lengths; topk: branching of the draft.
        impl: "auto" | "triton" | "torch".

    Returns:
        positions [bs*N] int64, retrieve_index, retrieve_next_token, retrieve_next_sibling
        ([bs, N] int64 each) and tree_mask [bs, N, N] bool (see the module docstring).
    """
    if selected_index.dim() != 2 or parent_list.dim() != 2:
        raise ValueError("parent_list and selected_index must be 2-D [bs, *]")
    if parent_list.shape[0] != selected_index.shape[0] or verified_seq_len.shape != selected_index.shape[:1]:
        raise ValueError("parent_list, selected_index and verified_seq_len must share bs")
    if topk < 1:
        raise ValueError(f"topk must be >= 1, found {topk}")
    if resolve_impl(impl, selected_index, parent_list) == "triton":
        return build_tree_triton(parent_list, selected_index, verified_seq_len, topk)
    return build_tree_torch(parent_list, selected_index, verified_seq_len, topk)
