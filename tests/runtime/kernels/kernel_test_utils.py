"""Shared helpers for the kernel tests: which impls can run here, and random inputs."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _triton_runnable() -> bool:
    if importlib.util.find_spec("triton") is None:
        return False
    return DEVICE == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


TRITON = pytest.param(
    "triton",
    marks=pytest.mark.skipif(not _triton_runnable(), reason="needs triton and TRITON_INTERPRET=1 on a CPU"),
)
IMPLS = ["torch", TRITON]
requires_triton = pytest.mark.skipif(not _triton_runnable(), reason="needs triton (TRITON_INTERPRET=1 on a CPU)")


def random_tree(gen: torch.Generator, bs: int, n: int, vocab: int):
    """Random trees in build_tree's encoding: (candidates, retrieve_index, next_token, next_sibling).

    Node i > 0 has a parent drawn from 0 .. i-1; children are listed in ascending order.
    """
    cand = torch.randint(0, vocab, (bs, n), generator=gen)
    ridx = torch.arange(bs * n).view(bs, n)
    nxt = torch.full((bs, n), -1, dtype=torch.int64)
    sib = torch.full((bs, n), -1, dtype=torch.int64)
    for b in range(bs):
        last_child = {}
        for i in range(1, n):
            parent = int(torch.randint(0, i, (1,), generator=gen))
            if parent in last_child:
                sib[b, last_child[parent]] = i
            else:
                nxt[b, parent] = i
            last_child[parent] = i
    return cand, ridx, nxt, sib


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's statistic of observed ``counts`` against expected ``probs * counts.sum()``."""
    expected = probs.double() * counts.sum().double()
    return float(((counts.double() - expected) ** 2 / expected).sum())


# Upper 0.1% points of the chi-square distribution (standard tables), by degrees of freedom:
# a correct sampler fails a seeded test with probability 1e-3 at most.
CHI2_CRIT_001 = {3: 16.266, 4: 18.467, 5: 20.515, 7: 24.322}
