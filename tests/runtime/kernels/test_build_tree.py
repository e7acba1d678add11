import random

import pytest
import torch

from kernel_test_utils import DEVICE, IMPLS
from specplan.runtime.kernels import build_tree, build_tree_torch, verify_tree_greedy


def _eagle_choices(rng, topk, depth, n):
    """One row of EAGLE-style (parent_list, selected_index).

    Slots: level 0 holds topk slots; level L >= 1 holds topk*topk slots starting at
    topk + (L-1)*topk*topk, slot topk + (L-1)*topk^2 + k*topk + c being child c of beam k of
    level L-1. parent_list[1 + (L-1)*topk + k] is the slot of that beam.
    """
    beams = [list(range(topk))]
    for level in range(1, depth):
        start = topk + (level - 1) * topk * topk
        beams.append(sorted(rng.sample(range(start, start + topk * topk), topk)))
    parent_list = [-1] + [s for level in beams[:-1] for s in level]
    parent_of = {}
    for level in range(1, depth):
        start = topk + (level - 1) * topk * topk
        for slot in range(start, start + topk * topk):
            parent_of[slot] = beams[level - 1][(slot - start) // topk]
    frontier, chosen = set(range(topk)), set()
    while len(chosen) < n - 1:
        slot = rng.choice(sorted(frontier))
        frontier.discard(slot)
        chosen.add(slot)
        frontier |= {s for s, p in parent_of.items() if p == slot}
    return parent_list, sorted(chosen)


def _scalar_reference(parent_list, selected, seq_len, topk):
    """SGLang's loop form for one row: backwards insertion of children, upward walk per node."""
    n = len(selected) + 1

    def parent(i):
        slot = selected[i - 1] // topk
        if slot == 0:
            return 0
        target = parent_list[slot]
        return selected.index(target) + 1 if target in selected else -1

    next_token, next_sibling = [-1] * n, [-1] * n
    for i in range(n - 1, 0, -1):
        p = parent(i)
        if p < 0:
            continue
        next_sibling[i] = next_token[p]
        next_token[p] = i
    mask = [[j == 0 or j == i for j in range(n)] for i in range(n)]
    positions = [seq_len] * n
    for i in range(1, n):
        cur = i
        while cur > 0:
            mask[i][cur] = True
            cur = parent(cur)
            positions[i] += 1
    return positions, next_token, next_sibling, mask


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("topk,depth,n", [(1, 5, 6), (2, 3, 5), (4, 3, 8), (4, 5, 16), (8, 4, 33)])
def test_matches_the_scalar_semantics(impl, topk, depth, n):
    rng = random.Random(topk * 100 + n)
    rows = [_eagle_choices(rng, topk, depth, n) for _ in range(3)]
    parent_list = torch.tensor([r[0] for r in rows])
    selected = torch.tensor([r[1] for r in rows])
    seq = torch.tensor([5, 0, 17], dtype=torch.int32)
    positions, ridx, nxt, sib, mask = build_tree(*[t.to(DEVICE) for t in (parent_list, selected, seq)], topk, impl=impl)
    for b, (pl, sel) in enumerate(rows):
        exp_pos, exp_next, exp_sib, exp_mask = _scalar_reference(pl, sel, int(seq[b]), topk)
        assert positions.view(3, n)[b].tolist() == exp_pos
        assert nxt[b].tolist() == exp_next and sib[b].tolist() == exp_sib
        assert mask[b].tolist() == exp_mask
    assert torch.equal(ridx.cpu(), torch.arange(3 * n).view(3, n))
    for e, g in zip(build_tree_torch(parent_list, selected, seq, topk), (positions, ridx, nxt, sib, mask)):
        assert torch.equal(e, g.cpu())


@pytest.mark.parametrize("impl", IMPLS)
def test_chain(impl):
    steps = 4
    parent_list = torch.tensor([[-1, 0, 1, 2]])
    selected = torch.arange(steps)[None]
    positions, _, nxt, sib, mask = build_tree(parent_list, selected, torch.tensor([9]), 1, impl=impl)
    assert positions.tolist() == [9, 10, 11, 12, 13]
    assert nxt.tolist() == [[1, 2, 3, 4, -1]] and sib.eq(-1).all()
    assert torch.equal(mask[0], torch.ones(5, 5, dtype=torch.bool).tril())


@pytest.mark.parametrize("impl", IMPLS)
def test_orphan_and_edges(impl):
    # Node 2's parent slot (7) is not selected: an orphan at depth 1, linked under nobody.
    parent_list = torch.tensor([[-1, 0, 7]])
    selected = torch.tensor([[0, 4]])
    positions, _, nxt, sib, mask = build_tree(parent_list, selected, torch.tensor([3]), 2, impl=impl)
    assert positions.tolist() == [3, 4, 4] and nxt.tolist() == [[1, -1, -1]] and sib.eq(-1).all()
    assert mask[0].tolist() == [[True, False, False], [True, True, False], [True, False, True]]
    root_only = build_tree(torch.tensor([[-1]]), torch.empty(1, 0, dtype=torch.int64), torch.tensor([4]), 1, impl=impl)
    assert root_only[0].tolist() == [4] and root_only[2].tolist() == [[-1]] and root_only[4].tolist() == [[[True]]]
    empty = build_tree(torch.empty(0, 3, dtype=torch.int64), torch.empty(0, 3, dtype=torch.int64),
                       torch.empty(0, dtype=torch.int32), 2, impl=impl)
    assert [tuple(t.shape) for t in empty] == [(0,), (0, 4), (0, 4), (0, 4), (0, 4, 4)]


def test_feeds_verify_tree_greedy():
    """A built tree verified against a target that agrees with the whole path to one leaf."""
    parent_list = torch.tensor([[-1, 0, 1]])
    selected = torch.tensor([[0, 1, 2, 3]])  # slots: 0, 1 under root; 2, 3 under slot 0 (node 1)
    _, ridx, nxt, sib, _ = build_tree(parent_list, selected, torch.tensor([0]), 2, impl="torch")
    candidates = torch.tensor([[50, 10, 11, 20, 21]])
    target = torch.tensor([[10, 21, 0, 0, 0]])  # after root: 10 (node 1); after node 1: 21 (node 4)
    predicts, accept_index, num = verify_tree_greedy(candidates, ridx, nxt, sib, target, 3, impl="torch")
    assert accept_index.tolist() == [[0, 1, 4]] and num.tolist() == [2]


@pytest.mark.parametrize("impl", IMPLS)
def test_one_step_tree(impl):
    """num_steps 1 (issue 21): every node is a child of the root and parent_list is [bs, 0],
    as SGLang's organize_draft_results makes it; nothing reads it."""
    parent_list = torch.empty(2, 0, dtype=torch.int64)
    selected = torch.tensor([[0, 1, 2, 3], [0, 1, 2, 3]])
    positions, _, nxt, sib, mask = build_tree(parent_list, selected, torch.tensor([6, 2]), 4, impl=impl)
    assert positions.view(2, 5).tolist() == [[6, 7, 7, 7, 7], [2, 3, 3, 3, 3]]
    assert nxt[:, 0].tolist() == [1, 1] and sib[0].tolist() == [-1, 2, 3, 4, -1]
    assert torch.equal(mask[0], torch.eye(5, dtype=torch.bool) | (torch.arange(5) == 0))


@pytest.mark.parametrize("impl", IMPLS)
def test_slot_past_parent_list_is_an_orphan(impl):
    parent_list = torch.tensor([[-1, 0]])
    selected = torch.tensor([[0, 9]])  # slot 9 // 2 = 4: no parent_list entry
    positions, _, nxt, _, _ = build_tree(parent_list, selected, torch.tensor([0]), 2, impl=impl)
    assert positions.tolist() == [0, 1, 1] and nxt.tolist() == [[1, -1, -1]]
