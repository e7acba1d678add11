import pytest
import torch

from kernel_test_utils import CHI2_CRIT_001, DEVICE, IMPLS, chi_square, random_tree, requires_triton
from specplan.runtime.kernels import tree_sample_target_only, tree_sample_target_only_torch


def _to(args):
    return [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]


def _random_case(gen, bs, n, vocab, num_spec, target_only=True):
    tree = random_tree(gen, bs, n, vocab)
    target = torch.rand(bs, n, vocab, generator=gen).pow(2)
    target /= target.sum(-1, keepdim=True)
    draft = torch.zeros_like(target) if target_only else torch.rand(bs, n, vocab, generator=gen).softmax(-1)
    coins = torch.rand(bs, n, generator=gen)
    final = torch.rand(bs, generator=gen)
    return (*tree, coins, final, target, draft, num_spec)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", range(5))
def test_random_against_reference(impl, seed):
    gen = torch.Generator().manual_seed(seed)
    args = _random_case(gen, bs=5, n=2 + seed, vocab=[1, 3, 7, 40, 5][seed], num_spec=1 + seed % 4,
                        target_only=seed % 2 == 0)
    kwargs = {"threshold_single": 0.9, "threshold_acc": 0.6} if seed == 3 else {}
    expected = tree_sample_target_only_torch(*args, **kwargs)
    got = tree_sample_target_only(*_to(args), **kwargs, impl=impl)
    for e, g in zip(expected, got):
        assert torch.equal(e, g.cpu())


def _two_level_tree():
    """Root with children 1 (token 2) and 2 (token 0); node 1 has child 3 (token 1)."""
    cand = torch.tensor([[9, 2, 0, 1]])
    ridx = torch.arange(4)[None]
    nxt = torch.tensor([[1, 3, -1, -1]])
    sib = torch.tensor([[-1, 2, -1, -1]])
    return cand, ridx, nxt, sib


@pytest.mark.parametrize("impl", IMPLS)
def test_fixed_walks(impl):
    cand, ridx, nxt, sib = _two_level_tree()
    target = torch.tensor([[[0.5, 0.0, 0.3, 0.2]] * 4])
    zeros = torch.zeros_like(target)
    # coin 0.2 < p(2) = 0.3: accept node 1; its coin 0.0 vs p(1) = 0 -> reject (no mass).
    # Residual at node 1 without token 1: [.5, 0, .3, .2]; final coin .7 -> cdf [.5, .5, .8] -> 2.
    args = (cand, ridx, nxt, sib, torch.tensor([[0.2, 0.0, 0.5, 0.5]]), torch.tensor([0.7]), target, zeros, 3)
    predicts, accept_index, num = tree_sample_target_only(*_to(args), impl=impl)
    assert accept_index.tolist() == [[0, 1, -1]] and num.tolist() == [1]
    assert predicts.tolist() == [2, 2, 0, 0]
    # coin 0.9: rejects token 2 (0.9 >= 0.3) and token 0 (0.9 >= 0.8); residual [0, 0, 0, .2] -> 3.
    args = (cand, ridx, nxt, sib, torch.tensor([[0.9, 0.0, 0.5, 0.5]]), torch.tensor([0.0]), target, zeros, 3)
    predicts, accept_index, num = tree_sample_target_only(*_to(args), impl=impl)
    assert accept_index.tolist() == [[0, -1, -1]] and num.tolist() == [0] and predicts.tolist() == [3, 0, 0, 0]
    # threshold_single 0.25 accepts p(2) = 0.3 whatever the coin.
    predicts, _, num = tree_sample_target_only(*_to(args), threshold_single=0.25, impl=impl)
    assert num.tolist() == [1]


@pytest.mark.parametrize("impl", IMPLS)
def test_edges(impl):
    empty = torch.empty(0, 3, dtype=torch.int64)
    outs = tree_sample_target_only(empty, empty, empty, empty, torch.empty(0, 3), torch.empty(0),
                                   torch.empty(0, 3, 2), torch.empty(0, 3, 2), 2, impl=impl)
    assert [tuple(t.shape) for t in outs] == [(0,), (0, 2), (0,)]
    # One-token vocabulary: every draft is token 0 with p = 1, always accepted; final draw is 0.
    gen = torch.Generator().manual_seed(0)
    args = _random_case(gen, bs=3, n=4, vocab=1, num_spec=4)
    predicts, _, num = tree_sample_target_only(*_to(args), impl=impl)
    assert predicts.eq(0).all()


def test_keeps_the_target_distribution():
    """First emitted token after the root is distributed as the root's target row."""
    gen = torch.Generator().manual_seed(99)
    bs, vocab = 20000, 5
    p = torch.tensor([0.1, 0.35, 0.05, 0.3, 0.2])
    # Root with three leaf children holding distinct tokens (SGLang's trees never repeat a
    # token among siblings: prob_acc would count its mass twice).
    cand = torch.tensor([[0, 1, 3, 4]]).repeat(bs, 1)
    ridx = torch.arange(bs * 4).view(bs, 4)
    nxt = torch.tensor([[1, -1, -1, -1]]).repeat(bs, 1)
    sib = torch.tensor([[-1, 2, 3, -1]]).repeat(bs, 1)
    target = p.expand(bs, 4, vocab).contiguous()
    args = (cand, ridx, nxt, sib, torch.rand(bs, 4, generator=gen), torch.rand(bs, generator=gen),
            target, torch.zeros_like(target), 2)
    predicts, _, _ = tree_sample_target_only_torch(*args)
    first = predicts.view(bs, 4)[:, 0].to(torch.int64)
    counts = torch.bincount(first, minlength=vocab)
    assert chi_square(counts, p) < CHI2_CRIT_001[vocab - 1]
    assert chi_square(counts, torch.full((vocab,), 1 / vocab)) > CHI2_CRIT_001[vocab - 1]


@requires_triton
def test_triton_matches_reference_on_many_rows():
    gen = torch.Generator().manual_seed(5)
    args = _random_case(gen, bs=64, n=6, vocab=8, num_spec=4)
    for e, g in zip(tree_sample_target_only_torch(*args), tree_sample_target_only(*_to(args), impl="triton")):
        assert torch.equal(e, g.cpu())


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("n", [1, 4])
def test_zero_rows(impl, n):
    """An idle DP replica samples no request: every output has zero rows (issue 37)."""
    vocab = 8
    long = torch.empty(0, n, dtype=torch.int64)
    probs = torch.empty(0, n, vocab)
    args = (long, long, long, long, torch.empty(0, n), torch.empty(0), probs, torch.zeros_like(probs), n)
    predict, index, count = tree_sample_target_only(*_to(args), impl=impl)
    assert predict.numel() == 0 and index.shape == (0, n) and count.shape == (0,)
