"""PP splits of each engine (reference/vllm.md §1.1, DESIGN.md §5) and tap ownership (§2.4)."""

from __future__ import annotations

import pytest

from specplan.engines import convention
from specplan.mesh.pipeline import build_stages, tap_owner


@pytest.mark.parametrize("layers, pp, parts", [
    (32, 3, [11, 11, 10]), (61, 4, [15, 15, 16, 15]), (94, 4, [23, 24, 24, 23]),
    (43, 2, [22, 21]), (45, 4, [11, 11, 12, 11]), (80, 3, [27, 27, 26]), (32, 4, [8, 8, 8, 8]),
    (7, 7, [1] * 7), (5, 1, [5]),
])
def test_vllm_split(layers, pp, parts):
    assert convention("vllm").split_layers(layers, pp) == parts


@pytest.mark.parametrize("layers, pp, parts", [
    (61, 4, [15, 15, 15, 16]), (32, 3, [10, 11, 11]), (80, 3, [26, 27, 27]), (32, 2, [16, 16]),
])
def test_sglang_split(layers, pp, parts):
    assert convention("sglang").split_layers(layers, pp) == parts


@pytest.mark.parametrize("parts, taps, owned, bases", [
    ([16, 16], (2, 16, 29), [(2, 16), (29,)], [0, 2]),
    ([8, 8, 8, 8], (2, 16, 29), [(2,), (16,), (), (29,)], [0, 1, 2, 2]),
    ([27, 27, 26], (2, 40, 77), [(2,), (40,), (77,)], [0, 1, 2]),
    ([4, 4], (0, 2, 4), [(0, 2, 4), ()], [0, 3]),
    ([4, 4], (5, 8), [(), (5, 8)], [0, 0]),
])
def test_tap_ownership_and_slot_base(parts, taps, owned, bases):
    stages = build_stages(parts, taps)
    assert [s.taps for s in stages] == owned
    # slot base of stage r = number of taps produced upstream of it (vLLM's bisect_right on start)
    assert [sum(len(s.taps) for s in stages[:r]) for r in range(len(parts))] == bases


def test_tap_outside_the_model_is_an_internal_error():
    with pytest.raises(ValueError, match="tap 9 is outside layers 0..8"):
        tap_owner(9, [(0, 4), (4, 8)])
