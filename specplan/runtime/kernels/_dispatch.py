"""Choosing between a kernel's Triton implementation and its pure-torch reference.

Every public kernel takes ``impl="auto" | "triton" | "torch"``:

- ``"auto"``: Triton when an input tensor is on a CUDA device and triton imports, else torch.
- ``"triton"``: always Triton. On a CPU that needs the Triton interpreter, so
  ``TRITON_INTERPRET=1`` must be set before the first kernel is built.
- ``"torch"``: the pure-torch reference, on any device.

triton is imported lazily (inside functions) so ``import specplan.runtime.kernels`` works
on a machine with torch only.
"""

from __future__ import annotations

import importlib.util
import os

IMPLS = ("auto", "triton", "torch")


def triton_available() -> bool:
    """True when the triton package can be imported."""
    return importlib.util.find_spec("triton") is not None


def resolve_impl(impl: str, *tensors) -> str:
    """Return "triton" or "torch" for ``impl`` given the kernel's input tensors."""
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, found {impl!r}")
    if impl == "torch":
        return "torch"
    on_cuda = any(t is not None and t.is_cuda for t in tensors)
    if impl == "auto":
        return "triton" if on_cuda and triton_available() else "torch"
    if not triton_available():
        raise ImportError("impl='triton' needs the triton package (pip install 'specplan[runtime]')")
    if not on_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "impl='triton' with CPU tensors runs the Triton interpreter: set TRITON_INTERPRET=1 "
            "in the environment before the first kernel call, or pass impl='torch'"
        )
    return "triton"


def next_pow2(n: int, minimum: int = 16) -> int:
    """The smallest power of two >= max(n, minimum); Triton block sizes must be powers of two."""
    n = max(int(n), minimum)
    return 1 << (n - 1).bit_length()
