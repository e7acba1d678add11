"""Speculative-decoding kernels: Triton kernels, each beside a pure-torch reference.

One kernel per module; each module holds the Triton kernel, ``<name>_torch`` (the reference,
same arguments and outputs) and the public function, which takes
``impl="auto" | "triton" | "torch"`` (auto: Triton for CUDA tensors, the reference on a CPU;
"triton" on a CPU needs ``TRITON_INTERPRET=1``). Randomness is always an input (uniform coins,
exponential noise), never drawn inside a kernel, so results are reproducible and can be
converged across ranks. Conventions: lengths int32, tokens int64, placeholder -1.

Public functions:

- :func:`greedy_accept` - greedy chain accept (output tokens, correct_len, bonus).
- :func:`rejection_sample` - chain rejection sampling, vLLM V1 semantics, ragged batches.
- :func:`verify_tree_greedy` - SGLang's greedy tree verify.
- :func:`tree_sample_target_only` - SGLang's target-only tree sampling (coins as inputs).
- :func:`build_tree` - parent lists -> retrieve lists, positions, tree mask.
- :func:`finalize_accept` - commit/seq/cap-trim lengths and out tokens (DSpark).
- :func:`guard_write` / :func:`guard_check` - the device path's guard header, written or
  compared into the desync flag in one launch each.
- :func:`pack_fused` / :func:`unpack_fused` - one byte buffer for a fused converge;
  :class:`FusedLayout` - the same layout prepared once (checked once, views made once).
"""

from specplan.runtime.kernels.build_tree import build_tree, build_tree_torch
from specplan.runtime.kernels.finalize_accept import finalize_accept, finalize_accept_torch
from specplan.runtime.kernels.fused_buffer import (
    FusedLayout,
    pack_fused,
    pack_fused_torch,
    unpack_fused,
    unpack_fused_torch,
)
from specplan.runtime.kernels.guard_check import (
    guard_check,
    guard_check_torch,
    guard_write,
    guard_write_torch,
)
from specplan.runtime.kernels.greedy_accept import greedy_accept, greedy_accept_torch
from specplan.runtime.kernels.rejection_sample import rejection_sample, rejection_sample_torch
from specplan.runtime.kernels.tree_sample_target_only import (
    tree_sample_target_only,
    tree_sample_target_only_torch,
)
from specplan.runtime.kernels.verify_tree_greedy import (
    verify_tree_greedy,
    verify_tree_greedy_torch,
)

__all__ = [
    "FusedLayout",
    "build_tree",
    "build_tree_torch",
    "finalize_accept",
    "finalize_accept_torch",
    "pack_fused",
    "pack_fused_torch",
    "unpack_fused",
    "unpack_fused_torch",
    "greedy_accept",
    "greedy_accept_torch",
    "guard_check",
    "guard_check_torch",
    "guard_write",
    "guard_write_torch",
    "rejection_sample",
    "rejection_sample_torch",
    "tree_sample_target_only",
    "tree_sample_target_only_torch",
    "verify_tree_greedy",
    "verify_tree_greedy_torch",
]
