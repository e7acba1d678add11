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
- Both check the layout on every call; ``check=False`` skips that for a layout checked before.
- :class:`FusedLayout` is a layout prepared once for one buffer (checked once, typed views of
  every field made once): ``pack(tensors)`` is one ``copy_`` per field on a CPU (one Triton
  launch on CUDA), ``unpack()`` returns the views, ``unpack(copy=True)`` one private copy. This
  is what a hot path (the runtime's converges) should hold.

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
               *, impl="auto", check=True) -> torch.Tensor:
    """Copy each tensor's bytes into ``buffer`` (uint8 [capacity]) at its byte offset; return buffer.

    ``check=False`` skips the layout checks (alignment, overlap, capacity, device): only for a
    layout already checked once, e.g. by :class:`FusedLayout`.
    """
    if check:
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


def unpack_fused(buffer: torch.Tensor, specs, *, copy=False, impl="auto", check=True) -> list[torch.Tensor]:
    """Read fields back from a packed buffer.

    Args:
        buffer: uint8 [capacity] packed by :func:`pack_fused`.
        specs: (dtype, shape, byte offset) per field.
        copy: False returns views into ``buffer`` (no kernel); True returns fresh tensors.
        impl: "auto" | "triton" | "torch" (matters only with copy=True).
        check: False skips the layout checks (a layout checked before).
    """
    specs = [(dtype, tuple(shape), int(off)) for dtype, shape, off in specs]
    if check:
        _check_fields(buffer, [(d, _nbytes(d, s), o, f"field {i}") for i, (d, s, o) in enumerate(specs)])
    if copy and resolve_impl(impl, buffer) == "triton":
        return unpack_fused_triton(buffer, specs)
    return unpack_fused_torch(buffer, specs, copy)


class FusedLayout:
    """A packed layout over one buffer, checked once; packing and unpacking without per-call checks.

    ``specs`` are ``(dtype, shape, byte offset)`` per field, checked like :func:`unpack_fused`
    checks them. The typed, shaped view of every field into ``buffer`` is made here, once:

    - ``pack(tensors)``: torch path (a CPU buffer, or ``impl="torch"``): one ``copy_`` per
      field into its view; Triton path (CUDA, or ``impl="triton"``): one launch for all fields.
      Each tensor must have its field's dtype and shape (``check=False`` skips that test too).
    - ``unpack()``: the views themselves (no copy: the next pack overwrites them).
    - ``unpack(copy=True)``: fresh tensors; torch path: one ``clone`` per field view (cheaper
      on a CPU than one clone of the span re-viewed per field); Triton path: one launch.

    Bytes of the buffer outside the fields (a guard header) are never touched.
    """

    def __init__(self, buffer: torch.Tensor, specs, *, impl="auto"):
        specs = [(dtype, tuple(int(d) for d in shape), int(off)) for dtype, shape, off in specs]
        sizes = [_nbytes(d, s) for d, s, _ in specs]
        _check_fields(buffer, [(d, n, o, f"field {i}") for i, ((d, _, o), n) in enumerate(zip(specs, sizes))])
        self.buffer, self.specs = buffer, specs
        self.impl = resolve_impl(impl, buffer)
        self.views = [buffer[o: o + n].view(d).view(s) for (d, s, o), n in zip(specs, sizes)]
        self.dtypes = tuple(d for d, _, _ in specs)
        self.shapes = tuple(torch.Size(s) for _, s, _ in specs)
        self.nbytes = tuple(sizes)
        self._dst = [(v, n) for v, n in zip(self.views, sizes)]

    def _check(self, tensors) -> None:
        if len(tensors) != len(self.views):
            raise ValueError(f"{len(tensors)} tensors for a layout of {len(self.views)} fields")
        for i, (t, d, s) in enumerate(zip(tensors, self.dtypes, self.shapes)):
            if t.dtype != d or t.shape != s:
                raise ValueError(f"field {i}: expected {d} {list(s)}, found {t.dtype} {list(t.shape)}")
            if self.impl == "triton" and t.device != self.buffer.device:
                raise ValueError(f"field {i}: tensors must be on the buffer's device "
                                 f"{self.buffer.device}, found {t.device}")

    def pack(self, tensors: Sequence[torch.Tensor], *, check=True) -> torch.Tensor:
        """Copy every tensor into its field of the buffer; returns the buffer."""
        if check:
            self._check(tensors)
        if self.impl == "triton":
            sources = [t.contiguous() for t in tensors]  # alive until the launch is queued
            copy_bytes_triton([(s, v, n) for s, (v, n) in zip(sources, self._dst)], self.buffer.device)
        else:
            for v, t in zip(self.views, tensors):
                v.copy_(t)
        return self.buffer

    def unpack(self, *, copy=False) -> list[torch.Tensor]:
        """The fields: views of the buffer, or (copy=True) tensors of their own."""
        if not copy:
            return list(self.views)
        if self.impl == "triton":
            return unpack_fused_triton(self.buffer, self.specs)
        return [v.clone() for v in self.views]
