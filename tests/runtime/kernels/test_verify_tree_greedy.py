import pytest
import torch

from kernel_test_utils import DEVICE, IMPLS, random_tree
from specplan.runtime.kernels import verify_tree_greedy, verify_tree_greedy_torch


def _to(*tensors):
    return [t.to(DEVICE) for t in tensors]


def _sglang_example():
    """sgl-kernel's test_verify_tree_greedy tree (two rows of 6 nodes), as data."""
    candidates = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 9, 10, 11, 12]])
    retrieve_index = torch.arange(12).view(2, 6)
    next_token = torch.tensor([[1, 2, -1, 4, 5, -1], [4, 2, 3, -1, 5, -1]])
    next_sibling = torch.tensor([[-1, 3, -1, -1, -1, -1], [-1, -1, -1, -1, 1, -1]])
    target = torch.full((2, 6), 18)
    target[0, 0], target[0, 3], target[0, 4] = 3, 4, 5
    target[1, 0], target[1, 4] = 11, 12
    return candidates, retrieve_index, next_token, next_sibling, target


@pytest.mark.parametrize("impl", IMPLS)
def test_sglang_example(impl):
    predicts, accept_index, accept_num = verify_tree_greedy(*_to(*_sglang_example()), 4, impl=impl)
    # SGLang's test prefills predicts with -1; ours is zero off the accepted path.
    assert predicts.tolist() == [3, 0, 0, 4, 5, 18, 11, 0, 0, 0, 12, 18]
    assert accept_index.tolist() == [[0, 3, 4, 5], [6, 10, 11, -1]]
    assert accept_num.tolist() == [3, 2]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", range(5))
def test_random_trees_against_reference(impl, seed):
    gen = torch.Generator().manual_seed(seed)
    bs, n = 6, 2 + 2 * seed
    tree = random_tree(gen, bs, n, vocab=2)
    target = torch.randint(0, 2, (bs, n), generator=gen)
    num_spec = 1 + seed
    expected = verify_tree_greedy_torch(*tree, target, num_spec)
    got = verify_tree_greedy(*_to(*tree, target), num_spec, impl=impl)
    for e, g in zip(expected, got):
        assert torch.equal(e, g.cpu())


def _chain(bs, n):
    nxt = torch.arange(1, n + 1).repeat(bs, 1)
    nxt[:, -1] = -1
    return torch.arange(bs * n).view(bs, n), nxt, torch.full((bs, n), -1)


@pytest.mark.parametrize("impl", IMPLS)
def test_chain_all_and_none_accepted(impl):
    bs, n = 256, 8
    ridx, nxt, sib = _chain(bs, n)
    target = torch.randint(0, 50, (bs, n), generator=torch.Generator().manual_seed(0))
    accepted_cand = torch.cat([torch.zeros(bs, 1, dtype=torch.int64), target[:, :-1]], dim=1)
    predicts, accept_index, num = verify_tree_greedy(*_to(accepted_cand, ridx, nxt, sib, target), n, impl=impl)
    assert num.eq(n - 1).all() and torch.equal(accept_index.cpu(), ridx.to(torch.int32))
    assert torch.equal(predicts.cpu(), target.view(-1).to(torch.int32))
    predicts, accept_index, num = verify_tree_greedy(*_to(accepted_cand + 100, ridx, nxt, sib, target), n, impl=impl)
    assert num.eq(0).all() and accept_index[:, 1:].eq(-1).all()
    assert torch.equal(predicts.cpu().view(bs, n)[:, 0], target[:, 0].to(torch.int32))


@pytest.mark.parametrize("impl", IMPLS)
def test_edges(impl):
    empty = torch.empty(0, 4, dtype=torch.int64)
    outs = verify_tree_greedy(*_to(empty, empty, empty, empty, empty), 3, impl=impl)
    assert [tuple(t.shape) for t in outs] == [(0,), (0, 3), (0,)]
    ridx, nxt, sib = _chain(2, 3)
    target = torch.tensor([[1, 2, 3], [4, 5, 6]])
    cand = torch.tensor([[0, 1, 2], [0, 4, 5]])
    predicts, accept_index, num = verify_tree_greedy(*_to(cand, ridx, nxt, sib, target), 1, impl=impl)
    assert num.tolist() == [0, 0] and accept_index.tolist() == [[0], [3]]
    assert predicts.tolist() == [1, 0, 0, 4, 0, 0]


def test_shape_errors():
    a = torch.zeros(2, 3, dtype=torch.int64)
    with pytest.raises(ValueError, match="tree tensors must all be"):
        verify_tree_greedy(a, a, a, a, torch.zeros(2, 4, dtype=torch.int64), 3)
