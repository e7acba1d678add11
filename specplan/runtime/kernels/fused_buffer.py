"""Packing many tensors of mixed dtypes into one byte buffer, and reading them back.

A fused converge sends one uint8 buffer per boundary: the plan fixes each field's byte
offset and the buffer's capacity (at max_batch), the runtime packs, sends once, unpacks.

- :func:`pack_fused` copies every tensor's bytes to ``buffer[offset : offset + nbytes]`` in
  one Triton launch: a table of (source address, destination address, nbytes) per field,
  grid (fields, chunks), each program copying one chunk of bytes. Bytes of the buffer
  outside the fields are left as they are (the guard header lives there).
- :func:`unpack_fused` returns, per ``(dtype, shape, offset)`` spec, a view of the buffer
  (``copy=False``, no launch) or a fresh tensor filled by one launch of the same copy kernel
  (``copy=True``).

Offsets must be multiples of the field's element size (so views are legal) and fields may
not overlap or run past the buffer's capacity.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

import torch

from specplan.runtime.kernels._dispatch import resolve_impl

_CHUNK = 1024  # bytes per program: one field of a max_batch converge is a few KiB at most


def _nbytes(dtype, shape) -> int:
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def _check_fields(buffer, fields):
    """fields: (dtype, nbytes, offset, name) per field; raises ValueError on a bad layout."""
    if buffer.dtype != torch.uint8 or buffer.dim() != 1 or not buffer.is_contiguous():
        raise ValueError("buffer must be a contiguous 1-D uint8 tensor")
    end_prev, prev = 0, None
    for dtype, nbytes, offset, name in sorted(fields, key=lambda f: f[2]):
        itemsize = torch.empty((), dtype=dtype).element_size()
        if offset < 0 or offset % itemsize:
            raise ValueError(f"{name}: offset {offset} must be >= 0 and a multiple of {itemsize} ({dtype})")
        if offset + nbytes > buffer.numel():
            raise ValueError(f"{name}: bytes [{offset}, {offset + nbytes}) exceed the capacity {buffer.numel()}")
        if offset < end_prev:
            raise ValueError(f"{name}: bytes from offset {offset} overlap {prev} (ends at {end_prev})")
        end_prev, prev = offset + nbytes, name


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def copy_bytes_kernel(table_ptr, CHUNK: tl.constexpr):
        field = tl.program_id(0)
        src = tl.load(table_ptr + field * 3).to(tl.pointer_type(tl.uint8))
        dst = tl.load(table_ptr + field * 3 + 1).to(tl.pointer_type(tl.uint8))
        nbytes = tl.load(table_ptr + field * 3 + 2)
        offs = tl.program_id(1).to(tl.int64) * CHUNK + tl.arange(0, CHUNK)
        m = offs < nbytes
        tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)

    return copy_bytes_kernel


def copy_bytes_triton(pairs, device):
    """One launch copying ``nbytes`` from ``src`` to ``dst`` for every (src, dst, nbytes)."""
    pairs = [p for p in pairs if p[2] > 0]
    if not pairs:
        return
    table = torch.tensor([[s.data_ptr(), d.data_ptr(), n] for s, d, n in pairs], dtype=torch.int64)
    chunks = max(-(-n // _CHUNK) for _, _, n in pairs)
    _kernel()[(len(pairs), chunks)](table.to(device), CHUNK=_CHUNK)


def _pack_fields(buffer, tensors, offsets):
    if len(tensors) != len(offsets):
        raise ValueError(f"{len(tensors)} tensors but {len(offsets)} offsets")
    fields = [(t.dtype, t.numel() * t.element_size(), int(o), f"field {i}")
              for i, (t, o) in enumerate(zip(tensors, offsets))]
    _check_fields(buffer, fields)
    for t in tensors:
        if t.device != buffer.device:
            raise ValueError(f"tensors must be on the buffer's device {buffer.device}, found {t.device}")


def pack_fused_torch(buffer, tensors, offsets):
    """Pure-torch reference of :func:`pack_fused`: one byte-view copy per field."""
    for t, off in zip(tensors, offsets):
        nbytes = t.numel() * t.element_size()
        buffer[off: off + nbytes].copy_(t.contiguous().reshape(-1).view(torch.uint8))
    return buffer


def pack_fused_triton(buffer, tensors, offsets):
    """Triton implementation of :func:`pack_fused`: one launch for every field."""
    sources = [t.contiguous() for t in tensors]  # kept alive until the launch is queued
    copy_bytes_triton(
        [(s, buffer[o:], s.numel() * s.element_size()) for s, o in zip(sources, offsets)],
        buffer.device,
    )
    return buffer


def pack_fused(buffer: torch.Tensor, tensors: Sequence[torch.Tensor], offsets: Sequence[int],
               *, impl="auto") -> torch.Tensor:
    """Copy each tensor's bytes into ``buffer`` (uint8 [capacity]) at its byte offset; return buffer."""
    _pack_fields(buffer, tensors, offsets)
    if resolve_impl(impl, buffer) == "triton":
        return pack_fused_triton(buffer, tensors, [int(o) for o in offsets])
    return pack_fused_torch(buffer, tensors, [int(o) for o in offsets])


def unpack_fused_torch(buffer, specs, copy=False):
    """Pure-torch reference of :func:`unpack_fused`: views of the buffer, cloned when copy."""
    out = []
    for dtype, shape, off in specs:
        view = buffer[off: off + _nbytes(dtype, shape)].view(dtype).view(tuple(shape))
        out.append(view.clone() if copy else view)
    return out


def unpack_fused_triton(buffer, specs):
    """Triton implementation of :func:`unpack_fused` with copy=True: one launch for all fields."""
    out = [torch.empty(tuple(shape), dtype=dtype, device=buffer.device) for dtype, shape, _ in specs]
    copy_bytes_triton(
        [(buffer[off:], t, _nbytes(dtype, shape)) for t, (dtype, shape, off) in zip(out, specs)],
        buffer.device,
    )
    return out


def unpack_fused(buffer: torch.Tensor, specs, *, copy=False, impl="auto") -> list[torch.Tensor]:
    """Read fields back from a packed buffer.

    Args:
        buffer: uint8 [capacity] packed by :func:`pack_fused`.
        specs: (dtype, shape, byte offset) per field.
        copy: False returns views into ``buffer`` (no kernel); True returns fresh tensors.
        impl: "auto" | "triton" | "torch" (matters only with copy=True).
    """
    specs = [(dtype, tuple(shape), int(off)) for dtype, shape, off in specs]
    _check_fields(buffer, [(d, _nbytes(d, s), o, f"field {i}") for i, (d, s, o) in enumerate(specs)])
    if copy and resolve_impl(impl, buffer) == "triton":
        return unpack_fused_triton(buffer, specs)
    return unpack_fused_torch(buffer, specs, copy)
