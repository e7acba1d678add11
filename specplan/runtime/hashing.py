"""64-bit hashes of decision tensors: the probe and the trace compare these, not the bytes."""

from __future__ import annotations

import hashlib

import torch


def hash64(t: torch.Tensor) -> int:
    """A signed 64-bit hash of dtype, shape and bytes (equal tensors hash equal on any device)."""
    t = t.detach().to("cpu").contiguous()
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{t.dtype}:{tuple(t.shape)}".encode())
    h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    value = int.from_bytes(h.digest(), "little")
    return value - (1 << 64) if value >= 1 << 63 else value


def preview(t: torch.Tensor, limit: int = 16) -> list:
    """The first `limit` values, for error messages and traces."""
    return t.detach().to("cpu").reshape(-1)[:limit].tolist()
