"""The handoff is planned per decode rank class: the classes read off the rules are the ones
the ranks hold, each with the last rank that holds it, for every pair the tables sweep and
for decode topologies with DP, DP-attention, independent worlds and PP."""

from __future__ import annotations

import pytest

from specplan.deploy.geometry import geometry
from specplan.deploy.handoff import _classes
from tests.deploy.pairs import SGLANG_PAIRS, VLLM_PAIRS, spec

DECODES = [("sglang", t) for t in ({"tp": 4, "dp": 2, "dp_attention": True}, {"tp": 2, "dp": 3},
                                   {"tp": 4, "pp": 2}, {"tp": 8, "dp": 4, "dp_attention": True, "pp": 2})]
DECODES += [("vllm", t) for t in ({"tp": 2, "dp": 3}, {"tp": 4, "pp": 2, "dp": 2}, {"tp": 2, "cp": 2})]
DECODES += [("sglang", d) for _, d, _, _ in SGLANG_PAIRS] + [("vllm", d) for _, d, _, _, *_ in VLLM_PAIRS]


@pytest.mark.parametrize("engine,topology", DECODES, ids=lambda x: str(x))
def test_classes_are_those_the_ranks_hold(engine, topology):
    d = geometry("decode", spec("d", engine, topology, layers=8))
    listed = {key: r for r, key in enumerate(zip(d.tp_of, d.pp_of))}
    assert _classes(d) == dict(sorted(listed.items()))
