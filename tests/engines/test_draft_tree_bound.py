"""specplan's bound on an EAGLE tree's num_draft_tokens under SGLang (engines/sglang/convention.py
`max_draft_tokens`: 1 + topk + (num_steps - 1) * topk^2) is where SGLang's own draft loop stops:
spec_utils._select_top_k_tokens_first / _later score each step's candidates and
eagle_utils.organize_draft_results picks num_draft_tokens - 1 of them, run here from the wheel
(the functions' own source, real torch on the CPU; only the package's imports are left out).
The newest release runs under `engines`, the older ones under `versions`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import List, Optional

import pytest
import torch
from real_code import function

from specplan.engines import convention
from specplan.engines.releases import RELEASES, newest

pytestmark = pytest.mark.engines
SPEC = "sglang/srt/speculative/spec_utils.py"
RELEASE_PARAMS = [pytest.param(v, marks=() if v == newest("sglang") else pytest.mark.versions)
                  for v in RELEASES["sglang"]]


def _sglang(version: str | None = None):
    fast_topk = function("sglang", "sglang/srt/utils/common.py", "fast_topk", {"torch": torch}, version)
    envs = SimpleNamespace(SGLANG_ENABLE_ASYNC_ASSERT=SimpleNamespace(get=lambda: True))
    oob = function("sglang", "sglang/srt/utils/async_probe.py", "maybe_detect_oob",
                   {"torch": torch, "envs": envs, "Optional": Optional}, version)
    ns = {"torch": torch, "fast_topk": fast_topk, "List": List, "maybe_detect_oob": oob}
    first = function("sglang", SPEC, "_select_top_k_tokens_first", ns, version)
    later = function("sglang", SPEC, "_select_top_k_tokens_later", ns, version)
    organize = function("sglang", "sglang/srt/speculative/eagle_utils.py", "organize_draft_results",
                        ns, version)
    return first, later, organize


def _draft(topk: int, steps: int, tokens: int, version: str | None = None, bs: int = 2):
    """SGLang's draft loop over random probabilities, then organize_draft_results."""
    first, later, organize = _sglang(version)
    g = torch.Generator().manual_seed(topk * 100 + steps)
    lists: tuple[list, list, list] = ([], [], [])
    scores = None
    for i in range(steps):
        rows = bs if i == 0 else bs * topk
        topk_p = torch.rand(rows, topk, generator=g).softmax(-1)
        topk_index = torch.randint(0, 1000, (rows, topk), generator=g)
        if i == 0:
            _, _, scores, info = first(topk_p, topk_index, None, topk)
        else:
            _, _, scores, info = later(i, topk_p, topk_index, None, scores, topk)
        for out, part in zip(lists, info):
            out.append(part)
    return organize(*lists, tokens)


@pytest.mark.parametrize("version", RELEASE_PARAMS)
@pytest.mark.parametrize("topk, steps", [(1, 4), (2, 3), (4, 5), (8, 5), (10, 1)])
def test_specplans_bound_is_where_sglangs_draft_tree_stops(topk, steps, version):
    top, _ = convention("sglang", version).max_draft_tokens(topk, steps)
    _, index, drafts = _draft(topk, steps, top, version)
    assert tuple(drafts.shape) == (2, top - 1)
    assert int(index.max()) < topk + (steps - 1) * topk * topk
    with pytest.raises(RuntimeError):
        _draft(topk, steps, top + 1, version)


def test_the_older_recipes_tree_fits_sglang_and_not_one_level_per_step():
    top, bound = convention("sglang").max_draft_tokens(8, 5)
    assert (top, bound) == (265, "1 + topk + (num_steps-1)*topk^2")
    _, _, drafts = _draft(8, 5, 64)  # the recipes' 64 tokens: past 1 + 8 * 5 = 41
    assert tuple(drafts.shape) == (2, 63)
