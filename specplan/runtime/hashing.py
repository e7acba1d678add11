"""64-bit hashes of decision tensors: the probe and the trace compare these, not the bytes."""

from __future__ import annotations

import hashlib

import torch


def hash64(t: torch.Tensor) -> int:
    """A signed 64-bit hash of dtype, shape and bytes (equal tensors hash equal on any device).

    One blake2b over the tensor's bytes as numpy sees them (no copy for a contiguous CPU
    tensor), after its dtype and shape: a few microseconds per decision.
    """
    t = t.detach()
    if t.device.type != "cpu" or not t.is_contiguous():
        t = t.to("cpu").contiguous()
    h = hashlib.blake2b(f"{t.dtype}:{tuple(t.shape)}".encode(), digest_size=8)
    if t.numel():
        h.update(t.reshape(-1).view(torch.uint8).numpy())  # type: ignore[arg-type]  # an ndarray is a buffer; numpy's stubs do not say so
    return int.from_bytes(h.digest(), "little", signed=True)


def preview(t: torch.Tensor, limit: int = 16) -> list:
    """The first `limit` values, for error messages and traces."""
    return t.detach().to("cpu").reshape(-1)[:limit].tolist()
