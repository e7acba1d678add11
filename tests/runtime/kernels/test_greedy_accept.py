import pytest
import torch

from kernel_test_utils import DEVICE, IMPLS
from specplan.runtime.kernels import greedy_accept, greedy_accept_torch


def _pad(rows, fill=0):
    width = max((len(r) for r in rows), default=0)
    return [list(r) + [fill] * (width - len(r)) for r in rows]


def _case(drafts, targets, bonus):
    """Build inputs from per-row drafts, the target argmax at each draft and the bonus."""
    n = torch.tensor([len(d) for d in drafts], dtype=torch.int32)
    width = max(len(d) for d in drafts)
    draft = torch.tensor(_pad(drafts), dtype=torch.int64).view(len(drafts), width)
    target = torch.tensor(
        _pad([t + [b] for t, b in zip(targets, bonus)], fill=0), dtype=torch.int64
    ).view(len(drafts), width + 1)
    # A row shorter than the widest puts its bonus right after its own drafts.
    return draft.to(DEVICE), target.to(DEVICE), n.to(DEVICE)


# vLLM's greedy cases (tests/v1/sample/test_rejection_sampler.py), as data.
VLLM_GREEDY_CASES = [
    ([[1, 2, 3]], [[1, 2, 3]], [4], [[1, 2, 3, 4]]),
    ([[1, 2, 3]], [[1, 5, 3]], [4], [[1, 5, -1, -1]]),
    ([[1, 2], [3]], [[1, 2], [3]], [5, 4], [[1, 2, 5], [3, 4, -1]]),
    ([[1]], [[1]], [2], [[1, 2]]),
    ([[]], [[]], [5], [[5]]),
    ([[1, 2, 3], [4, 5, 6]], [[1, 2, 7], [4, 8, 6]], [6, 7], [[1, 2, 7, -1], [4, 8, -1, -1]]),
    ([[1, 2]], [[1, 2]], [3], [[1, 2, 3]]),
    ([[1]], [[2]], [3], [[2, -1]]),
    ([[1, 2], [3, 4]], [[1, 5], [3, 4]], [6, 7], [[1, 5, -1], [3, 4, 7]]),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("drafts,targets,bonus,expected", VLLM_GREEDY_CASES)
def test_vllm_greedy_cases(impl, drafts, targets, bonus, expected):
    draft, target, n = _case(drafts, targets, bonus)
    out, correct_len, got_bonus = greedy_accept(draft, target, n, impl=impl)
    assert out.tolist() == expected
    accepted = [row.index(-1) - 1 if -1 in row else len(row) - 1 for row in expected]
    assert correct_len.tolist() == accepted
    assert got_bonus.tolist() == [row[k] for row, k in zip(expected, accepted)]
    assert out.dtype == torch.int64 and correct_len.dtype == torch.int32


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", range(4))
def test_random_against_reference(impl, seed):
    gen = torch.Generator().manual_seed(seed)
    bs, s = 9, 1 + seed * 2
    target = torch.randint(0, 3, (bs, s + 1), generator=gen)
    draft = torch.where(torch.rand(bs, s, generator=gen) < 0.8, target[:, :s], 7)
    n = torch.randint(0, s + 1, (bs,), generator=gen, dtype=torch.int32)
    num = None if seed % 2 else n
    expected = greedy_accept_torch(draft, target, num)
    got = greedy_accept(draft.to(DEVICE), target.to(DEVICE), None if num is None else num.to(DEVICE), impl=impl)
    for e, g in zip(expected, got):
        assert torch.equal(e, g.cpu())


@pytest.mark.parametrize("impl", IMPLS)
def test_edges(impl):
    empty = greedy_accept(torch.empty(0, 3, dtype=torch.int64), torch.empty(0, 4, dtype=torch.int64), impl=impl)
    assert [tuple(t.shape) for t in empty] == [(0, 4), (0,), (0,)]
    zero = greedy_accept(torch.empty(2, 0, dtype=torch.int64), torch.tensor([[5], [6]]), impl=impl)
    assert zero[0].tolist() == [[5], [6]] and zero[1].tolist() == [0, 0] and zero[2].tolist() == [5, 6]
    target = torch.arange(256 * 8).view(256, 8)
    all_ok = greedy_accept(target[:, :7].clone(), target, impl=impl)
    assert all_ok[1].eq(7).all() and torch.equal(all_ok[2], target[:, 7])
    none_ok = greedy_accept(target[:, :7] + 1, target, impl=impl)
    assert none_ok[1].eq(0).all() and torch.equal(none_ok[2], target[:, 0])
    assert none_ok[0][:, 1:].eq(-1).all()


def test_shape_errors():
    with pytest.raises(ValueError, match="target_argmax must be"):
        greedy_accept(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="impl must be one of"):
        greedy_accept(torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 4, dtype=torch.int64), impl="cuda")
