import pytest
import torch

from kernel_test_utils import DEVICE, IMPLS
from specplan.runtime.kernels import FusedLayout, pack_fused, unpack_fused


def _fields(gen):
    return [
        torch.randint(0, 1000, (7,), generator=gen, dtype=torch.int32),
        torch.randint(-5, 5, (3, 4), generator=gen),
        torch.rand(5, generator=gen),
        torch.rand(9, generator=gen) < 0.5,
        torch.rand(2, 3, generator=gen, dtype=torch.float64),
        torch.randn(3, generator=gen).to(torch.bfloat16),
        torch.empty(0, dtype=torch.int64),
    ]


def _offsets(tensors, start=16):
    """Back-to-back offsets, each aligned to 8 bytes, after a 16-byte header."""
    offsets, off = [], start
    for t in tensors:
        offsets.append(off)
        off += -(-(t.numel() * t.element_size()) // 8) * 8
    return offsets, off


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("copy", [False, True])
def test_round_trip(impl, copy):
    tensors = [t.to(DEVICE) for t in _fields(torch.Generator().manual_seed(0))]
    offsets, end = _offsets(tensors)
    buffer = torch.full((end + 40,), 0xAB, dtype=torch.uint8, device=DEVICE)
    pack_fused(buffer, tensors, offsets, impl=impl)
    reference = torch.full_like(buffer, 0xAB)
    pack_fused(reference, tensors, offsets, impl="torch")
    assert torch.equal(buffer, reference)
    assert buffer[:16].eq(0xAB).all() and buffer[end:].eq(0xAB).all()  # header and tail untouched
    specs = [(t.dtype, t.shape, o) for t, o in zip(tensors, offsets)]
    for t, (_, _, off), back in zip(tensors, specs, unpack_fused(buffer, specs, copy=copy, impl=impl)):
        assert back.dtype == t.dtype and torch.equal(back, t)
        if t.numel():
            # A view shares the buffer's bytes; a copy does not.
            assert (back.data_ptr() == buffer.data_ptr() + off) != copy


@pytest.mark.parametrize("impl", IMPLS)
def test_large_field_spans_many_chunks(impl):
    field = torch.arange(3000, dtype=torch.int32, device=DEVICE)
    buffer = torch.zeros(12032, dtype=torch.uint8, device=DEVICE)
    pack_fused(buffer, [field, field[:5]], [0, 12000], impl=impl)
    back = unpack_fused(buffer, [(torch.int32, (3000,), 0), (torch.int32, (5,), 12000)], copy=True, impl=impl)
    assert torch.equal(back[0], field) and torch.equal(back[1], field[:5])


def test_layout_errors():
    buffer = torch.zeros(32, dtype=torch.uint8)
    x = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="multiple of 4"):
        pack_fused(buffer, [x], [2])
    with pytest.raises(ValueError, match="exceed the capacity 32"):
        pack_fused(buffer, [x], [20])
    with pytest.raises(ValueError, match="overlap field 0"):
        pack_fused(buffer, [x, x], [0, 8])
    with pytest.raises(ValueError, match="1-D uint8"):
        pack_fused(torch.zeros(8, dtype=torch.int32), [x], [0])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("copy", [False, True])
def test_pack_and_unpack_without_checks_match_the_checked_calls(impl, copy):
    tensors = [t.to(DEVICE) for t in _fields(torch.Generator().manual_seed(1))]
    offsets, end = _offsets(tensors)
    checked, unchecked = (torch.full((end,), 7, dtype=torch.uint8, device=DEVICE) for _ in range(2))
    pack_fused(checked, tensors, offsets, impl=impl)
    pack_fused(unchecked, tensors, offsets, impl=impl, check=False)
    assert torch.equal(checked, unchecked)
    specs = [(t.dtype, t.shape, o) for t, o in zip(tensors, offsets)]
    for t, back in zip(tensors, unpack_fused(unchecked, specs, copy=copy, impl=impl, check=False)):
        assert torch.equal(back, t)


@pytest.mark.parametrize("impl", IMPLS)
def test_fused_layout_packs_into_views_and_unpacks(impl):
    tensors = [t.to(DEVICE) for t in _fields(torch.Generator().manual_seed(2))]
    offsets, end = _offsets(tensors, start=32)
    buffer = torch.full((end + 8,), 0xCD, dtype=torch.uint8, device=DEVICE)
    layout = FusedLayout(buffer, [(t.dtype, t.shape, o) for t, o in zip(tensors, offsets)], impl=impl)
    assert layout.impl == impl
    reference = torch.full_like(buffer, 0xCD)
    pack_fused(reference, tensors, offsets, impl="torch")
    for round_ in range(2):  # the views are made once and reused by every pack
        shifted = [t if t.dtype == torch.bool or not t.numel() else t + round_ for t in tensors]
        assert layout.pack(shifted) is buffer
        if round_ == 0:
            assert torch.equal(buffer, reference)  # header and tail bytes untouched
        views = layout.unpack()
        copies = layout.unpack(copy=True)
        for t, v, c, off in zip(shifted, views, copies, offsets):
            assert torch.equal(v, t) and torch.equal(c, t) and c.dtype == t.dtype
            if t.numel():
                assert v.data_ptr() == buffer.data_ptr() + off  # a view of the buffer
                assert c.data_ptr() != v.data_ptr()
    kept = layout.unpack(copy=True)
    layout.pack([torch.zeros_like(t) for t in tensors])
    assert all(torch.equal(k, t) for k, t in zip(kept, shifted))  # a copy outlives the next pack


def test_fused_layout_checks_once_and_refuses_wrong_tensors():
    buffer = torch.zeros(32, dtype=torch.uint8)
    with pytest.raises(ValueError, match="overlap field 0"):
        FusedLayout(buffer, [(torch.int32, (4,), 0), (torch.int32, (4,), 8)])
    with pytest.raises(ValueError, match="exceed the capacity 32"):
        FusedLayout(buffer, [(torch.int64, (4,), 8)])
    layout = FusedLayout(buffer, [(torch.int32, (4,), 0), (torch.int64, (2,), 16)])
    with pytest.raises(ValueError, match=r"field 0: expected torch.int32 \[4\], found torch.int32 \[1\]"):
        layout.pack([torch.zeros(1, dtype=torch.int32), torch.zeros(2, dtype=torch.int64)])
    with pytest.raises(ValueError, match="field 1: expected torch.int64"):
        layout.pack([torch.zeros(4, dtype=torch.int32), torch.zeros(2, dtype=torch.int32)])
    with pytest.raises(ValueError, match="2 tensors for a layout of"):
        FusedLayout(buffer, [(torch.int32, (4,), 0)]).pack([torch.zeros(4, dtype=torch.int32)] * 2)
