import pytest
import torch

from kernel_test_utils import DEVICE, IMPLS
from specplan.runtime.kernels import finalize_accept, finalize_accept_torch


def _to(*tensors):
    return [None if t is None else t.to(DEVICE) for t in tensors]


@pytest.mark.parametrize("impl", IMPLS)
def test_fixed_case(impl):
    correct_len = torch.tensor([0, 2, 3], dtype=torch.int32)
    bonus = torch.tensor([70, 71, 72])
    prefix = torch.tensor([10, 20, 30], dtype=torch.int32)
    drafts = torch.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
    verify = torch.tensor([4, 2, 4], dtype=torch.int32)
    commit, seq, trim, out = finalize_accept(*_to(correct_len, bonus, prefix, drafts, verify), impl=impl)
    assert commit.tolist() == [1, 3, 4] and seq.tolist() == [11, 23, 34]
    # Row 1 verified 2 tokens (1 draft) but 2 drafts were accepted: one is trimmed.
    assert trim.tolist() == [0, 1, 0]
    assert out.tolist() == [[70, 2, 3, 0], [4, 5, 71, 0], [7, 8, 9, 72]]
    assert commit.dtype == seq.dtype == trim.dtype == torch.int32 and out.dtype == torch.int64


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed", range(3))
def test_random_against_reference(impl, seed):
    gen = torch.Generator().manual_seed(seed)
    bs, gamma = [256, 7, 1][seed], [7, 3, 0][seed]
    correct_len = torch.randint(0, gamma + 1, (bs,), generator=gen, dtype=torch.int32)
    args = (correct_len, torch.randint(0, 99, (bs,), generator=gen),
            torch.randint(0, 500, (bs,), generator=gen, dtype=torch.int32),
            torch.randint(0, 99, (bs, gamma), generator=gen),
            None if seed == 1 else torch.randint(1, gamma + 2, (bs,), generator=gen, dtype=torch.int32))
    expected = finalize_accept_torch(*args)
    for e, g in zip(expected, finalize_accept(*_to(*args), impl=impl)):
        assert torch.equal(e, g.cpu())


@pytest.mark.parametrize("impl", IMPLS)
def test_empty_batch(impl):
    z32, z64 = torch.empty(0, dtype=torch.int32), torch.empty(0, dtype=torch.int64)
    outs = finalize_accept(*_to(z32, z64, z32, torch.empty(0, 4, dtype=torch.int64)), impl=impl)
    assert [tuple(t.shape) for t in outs] == [(0,), (0,), (0,), (0, 5)]
