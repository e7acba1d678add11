"""A test-only vLLM general plugin: one TP rank computes a different speculative decision.

Active only when SPECPLAN_TEST_FAULT_RANK names a global rank (else it does nothing). On that
rank it adds large seeded noise to the target's logits before vLLM 0.32's V2 RejectionSampler
runs, so that rank accepts other drafts and samples another bonus token than its TP peers:
the kind of per-rank disagreement (float results computed alone, e.g. on other hardware) that
specplan's accept site converges from its source. Lives in tests/ (its dist-info puts it on
vLLM's `vllm.general_plugins` entry point when this folder is on PYTHONPATH).
"""

import functools
import os

ENV_RANK = "SPECPLAN_TEST_FAULT_RANK"
SAMPLER = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"


def register() -> None:
    if not os.environ.get(ENV_RANK):
        return
    import importlib

    sampler = importlib.import_module(SAMPLER).RejectionSampler
    if getattr(sampler.__call__, "__specplan_fault__", False):
        return
    original = sampler.__call__

    @functools.wraps(original)
    def noisy(self, logits, *args, **kwargs):
        return original(self, _disturbed(logits), *args, **kwargs)

    noisy.__specplan_fault__ = True
    sampler.__call__ = noisy


def _disturbed(logits):
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() != int(os.environ[ENV_RANK]):
        return logits
    gen = torch.Generator(device=logits.device).manual_seed(1234 + logits.shape[0])
    noise = torch.randn(logits.shape, generator=gen, device=logits.device, dtype=logits.dtype)
    return logits + noise * (50 * logits.float().std().clamp(min=1.0)).to(logits.dtype)
