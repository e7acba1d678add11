import pytest
import torch

from kernel_test_utils import CHI2_CRIT_001, DEVICE, IMPLS, chi_square, requires_triton
from specplan.runtime.kernels import rejection_sample, rejection_sample_torch


def _random_inputs(gen, bs, vocab, max_drafts, with_draft_probs, greedy_frac):
    n = torch.randint(0, max_drafts + 1, (bs,), generator=gen, dtype=torch.int32)
    total = int(n.sum())
    target = torch.rand(total, vocab, generator=gen).pow(3)
    target /= target.sum(-1, keepdim=True)
    draft_probs = torch.rand(total, vocab, generator=gen).softmax(-1) if with_draft_probs else None
    draft = torch.randint(-1, vocab, (total,), generator=gen)
    bonus = torch.randint(0, vocab, (bs,), generator=gen)
    uniform = torch.rand(total, generator=gen, dtype=torch.float64)
    noise = torch.empty(bs, vocab).exponential_(generator=gen)
    greedy = (torch.rand(bs, generator=gen) < greedy_frac) if greedy_frac else None
    return draft, n, draft_probs, target, bonus, uniform, noise, greedy


def _to(args):
    return [a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in args]


def _one_hot_rows(tokens, vocab):
    probs = torch.full((len(tokens), vocab), 0.001)
    probs[torch.arange(len(tokens)), torch.tensor(tokens, dtype=torch.int64)] = 1.0
    return probs / probs.sum(-1, keepdim=True)


# vLLM's greedy expectations, run through the sampler with every row greedy.
GREEDY_CASES = [
    ([[1, 2, 3]], [[1, 2, 3]], [4], [[1, 2, 3, 4]]),
    ([[1, 2, 3]], [[1, 5, 3]], [4], [[1, 5, -1, -1]]),
    ([[1, 2], [3]], [[1, 2], [3]], [5, 4], [[1, 2, 5], [3, 4, -1]]),
    ([[]], [[]], [5], [[5]]),
    ([[1, 2, 3], [4, 5, 6]], [[1, 2, 7], [4, 8, 6]], [6, 7], [[1, 2, 7, -1], [4, 8, -1, -1]]),
    ([[1]], [[2]], [3], [[2, -1]]),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("drafts,targets,bonus,expected", GREEDY_CASES)
def test_vllm_greedy_cases(impl, drafts, targets, bonus, expected):
    flat_d = [t for d in drafts for t in d]
    flat_t = [t for r in targets for t in r]
    vocab = 10
    args = (
        torch.tensor(flat_d, dtype=torch.int64), torch.tensor([len(d) for d in drafts], dtype=torch.int32),
        None, _one_hot_rows(flat_t, vocab), torch.tensor(bonus),
        torch.rand(len(flat_d), dtype=torch.float64), torch.ones(len(drafts), vocab),
        torch.ones(len(drafts), dtype=torch.bool),
    )
    assert rejection_sample(*_to(args), impl=impl).tolist() == expected


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", range(6))
def test_random_against_reference(impl, seed):
    gen = torch.Generator().manual_seed(seed)
    args = _random_inputs(gen, bs=6, vocab=[1, 5, 33][seed % 3], max_drafts=4,
                          with_draft_probs=seed % 2 == 0, greedy_frac=0.3 * (seed % 3))
    expected = rejection_sample(*args, impl="torch")
    assert torch.equal(rejection_sample(*_to(args), impl=impl).cpu(), expected)


@pytest.mark.parametrize("impl", IMPLS)
def test_edges(impl):
    vocab = 4
    empty = (torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int32), None,
             torch.empty(0, vocab), torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.float64),
             torch.empty(0, vocab), None)
    assert rejection_sample(*_to(empty), impl=impl).shape == (0, 1)
    no_drafts = (torch.empty(0, dtype=torch.int64), torch.zeros(3, dtype=torch.int32), None,
                 torch.empty(0, vocab), torch.tensor([7, 8, 9]), torch.empty(0, dtype=torch.float64),
                 torch.ones(3, vocab), None)
    assert rejection_sample(*_to(no_drafts), max_spec_len=2, impl=impl).tolist() == [[7, -1, -1], [8, -1, -1], [9, -1, -1]]


def _fixed(drafts, target_rows, draft_rows, u, noise, greedy=None):
    n = torch.tensor([len(drafts)], dtype=torch.int32)
    return (torch.tensor(drafts), n, draft_rows, target_rows, torch.tensor([99]),
            torch.tensor(u, dtype=torch.float64), noise, greedy)


@pytest.mark.parametrize("impl", IMPLS)
def test_accept_reject_rules(impl):
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4]] * 3)
    q = torch.tensor([[0.25, 0.25, 0.25, 0.25]] * 3)
    ones = torch.ones(1, 4)
    # u = 0 accepts every in-vocabulary draft with q > 0: all accepted -> bonus.
    assert rejection_sample(*_to(_fixed([0, 1, 2], p, q, [0.0] * 3, ones)), impl=impl).tolist() == [[0, 1, 2, 99]]
    # p/q = 0.4 < u = 0.5 rejects at once; the residual max(p - q, 0) = [0, 0, .05, .15] -> 3.
    assert rejection_sample(*_to(_fixed([0, 1, 2], p, q, [0.5] * 3, ones)), impl=impl).tolist() == [[3, -1, -1, -1]]
    # A negative draft id is rejected even with u = 0; a zero draft prob too.
    assert rejection_sample(*_to(_fixed([-1, 1, 2], p, q, [0.0] * 3, ones)), impl=impl)[0, 0] == 3
    q0 = q.clone()
    q0[0, 0] = 0.0
    assert rejection_sample(*_to(_fixed([0, 1, 2], p, q0, [0.0] * 3, ones)), impl=impl)[0, 0] != 0
    # Without draft probs: accept iff p >= u; the recovered token masks the draft out.
    assert rejection_sample(*_to(_fixed([3, 3], p[:2], None, [0.4, 0.41], ones)), impl=impl).tolist() == [[3, 2, -1]]


@pytest.mark.parametrize("impl", IMPLS)
def test_ties_go_to_the_lowest_id(impl):
    tied = torch.tensor([[0.1, 0.4, 0.1, 0.4]])
    ones = torch.ones(1, 4)
    greedy = torch.tensor([True])
    assert rejection_sample(*_to(_fixed([3], tied, None, [0.5], ones, greedy)), impl=impl).tolist() == [[1, -1]]
    # Random row, residual [0, .4, 0, .4] over equal noise: a tie between 1 and 3.
    zero_q = torch.zeros(1, 4)
    zero_q[0, 0] = 1.0
    out = rejection_sample(*_to(_fixed([0], tied, zero_q, [0.5], ones)), impl=impl)
    assert out.tolist() == [[1, -1]]


@pytest.mark.parametrize("with_draft_probs", [True, False])
def test_keeps_the_target_distribution(with_draft_probs):
    """The first emitted token of every request is distributed as the target at position 0."""
    gen = torch.Generator().manual_seed(1234)
    bs, vocab, k = 20000, 6, 2
    p = torch.tensor([0.05, 0.3, 0.1, 0.25, 0.2, 0.1])
    q = torch.tensor([0.3, 0.1, 0.2, 0.1, 0.05, 0.25])
    draft_dist = q if with_draft_probs else torch.tensor([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    draft = torch.multinomial(draft_dist, bs * k, replacement=True, generator=gen)
    args = (draft, torch.full((bs,), k, dtype=torch.int32), q.expand(bs * k, vocab) if with_draft_probs else None,
            p.expand(bs * k, vocab).contiguous(), torch.zeros(bs, dtype=torch.int64),
            torch.rand(bs * k, generator=gen, dtype=torch.float64),
            torch.empty(bs, vocab).exponential_(generator=gen), None)
    out = rejection_sample_torch(*args, max_spec_len=k)
    counts = torch.bincount(out[:, 0], minlength=vocab)
    assert chi_square(counts, p) < CHI2_CRIT_001[vocab - 1]
    # A deliberately wrong expectation must fail: the test can tell distributions apart.
    assert chi_square(counts, q) > CHI2_CRIT_001[vocab - 1]


@requires_triton
def test_triton_matches_reference_on_distribution_inputs():
    gen = torch.Generator().manual_seed(7)
    args = _random_inputs(gen, bs=48, vocab=6, max_drafts=3, with_draft_probs=True, greedy_frac=0.2)
    assert torch.equal(rejection_sample(*_to(args), impl="triton").cpu(), rejection_sample(*args, impl="torch"))


def test_errors(monkeypatch):
    args = _fixed([0], torch.ones(1, 2) / 2, None, [0.5], torch.ones(1, 2))
    with pytest.raises(ValueError, match="max_spec_len=0 is below"):
        rejection_sample(*args, max_spec_len=0, impl="torch")
    if DEVICE == "cpu":
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        with pytest.raises((RuntimeError, ImportError), match="TRITON_INTERPRET=1|triton"):
            rejection_sample(*args, impl="triton")


@pytest.mark.parametrize("impl", IMPLS)
def test_recovered_token_scores_with_the_reciprocal_as_vllm_does(impl):
    """vLLM 0.33.0 scores the recovered token ``prob * q.reciprocal()`` (v1/sample/
    rejection_sampler.py sample_recovered_tokens). Target p = [0.31, 0.27, 0.42], an n-gram draft
    of token 2 (rejected: u = 1): tokens 0 and 1 tie to the ulp. ``0.27 / e1`` rounds to
    ``0.31 / 1.0`` (the quotient would keep token 0), ``0.27 * (1 / e1)`` rounds one ulp above it:
    vLLM recovers token 1."""
    e1 = 0.8709677457809448
    noise = torch.tensor([[1.0, e1, 1.0]])
    p = torch.tensor([[0.31, 0.27, 0.42]])
    prob = torch.tensor([0.31, 0.27])
    assert (prob / noise[0, :2]).argmax() == 0 and (prob * noise[0, :2].reciprocal()).argmax() == 1
    out = rejection_sample(*_to(_fixed([2], p, None, [1.0], noise)), impl=impl).cpu()
    assert out.tolist() == [[1, -1]]
