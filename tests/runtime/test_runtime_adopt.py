"""bind(groups=...) on real gloo ranks: adopt the caller's groups, create the rest in one order
on every rank, refuse a group whose ranks are not the plan's (on every rank, none hanging)."""

from __future__ import annotations

import pytest

import specs_rt

from tests.helpers import compile_spec
from tests.ranks import launch

CASES = [  # (spec, world, families the engine hands over, families that must share its group)
    pytest.param(specs_rt.TP2_DSPARK, 2, "tp",
                 {"tp", "attn_tp", "moe_tp", "replica", "replica_stage"}, id="tp2"),
    pytest.param(specs_rt.TP4_DPATTN_EAGLE, 4, "attn_tp", {"attn_tp", "replica", "replica_stage"},
                 id="tp4-dpattn"),
    pytest.param(specs_rt.TP4_DPATTN_EAGLE, 4, "replica", {"attn_tp", "replica", "replica_stage"},
                 id="tp4-dpattn-replica"),
    pytest.param(specs_rt.TP4_PP2_DSPARK_RING, 8, "tp,pp",
                 {"tp", "attn_tp", "moe_tp", "pp", "replica_stage"}, id="tp4-pp2",
                 marks=specs_rt.EIGHT_RANKS),
]


@pytest.mark.parametrize("text, world, families, shared", CASES)
def test_bind_adopts_the_callers_groups_and_creates_the_rest(tmp_path, text, world, families, shared):
    path = compile_spec(tmp_path, text)
    results = launch(world, "adopt", path, families)
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        res = r.result
        assert res["held"] == res["plan"]  # every group bind holds has the plan's ranks
        assert set(res["kept"]) == shared  # the caller's own group objects, no new communicator
        assert res["checks"] > 0
        made = {tuple(g) for g in res["created"]}
        assert not made & {tuple(res["plan"][f]) for f in shared}  # none made again
    assert len({tuple(map(tuple, r.result["created"])) for r in results}) == 1  # one global order
    assert results[0].result["created"]  # the families not handed over were still created


def test_bind_refuses_an_adopted_group_with_other_ranks_on_every_rank(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP4_DPATTN_EAGLE)
    results = launch(4, "adopt", path, "attn_tp", "strided")  # engine built [0,2] [1,3]
    for r in results:
        assert r.returncode == 3, r.stdout + r.stderr
        assert r.error.startswith("ERROR GroupMismatch: bind refused the process groups handed to it:")
    assert ("attn_tp: rank 0 was handed a group of ranks [0, 2], the plan's group for rank 0 is "
            "[0, 1]") in results[0].error
    assert "rank 3: attn_tp: rank 3 was handed a group of ranks [1, 3], the plan's group for rank 3 is [2, 3]" \
        in results[0].error


def test_bind_refuses_ranks_that_adopt_different_families(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "adopt", path, "tp", "rank1-none")
    for r in results:
        assert r.returncode == 3, r.stdout + r.stderr
        assert "every rank must hand over the same families" in r.error
        assert "rank 0 adopts ['tp']; rank 1 adopts []" in r.error


def test_bind_refuses_a_family_the_plan_does_not_have(tmp_path):
    path = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    results = launch(2, "adopt", path, "ep")
    for r in results:
        assert r.returncode == 3, r.stdout + r.stderr
        assert "ep: not a family of plan rt-tp2-dspark (its families: tp, " in r.error
