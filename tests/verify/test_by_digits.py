"""The proofs read on digits agree with the rank-by-rank reading they replace.

Every spec the repository holds (examples, goldens, the verifier's error specs) is planned; for
each broadcast site, the digit proof of agreement holds exactly when following every rank
finds nothing, and the stages that meet in each family's groups are those the rank lists
give. The partition test sweeps every small strided rule against its listed groups.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache
from pathlib import Path

import pytest

from specplan.errors import UserError
from specplan.mesh.digits import Digits, partitions
from specplan.mesh.family import Family
from specplan import compile
from specplan.plan import PlanView
from specplan.schema import load_spec
from specplan.verify import agreement, schedules

ROOT = Path(__file__).parents[2]
SPECS = sorted(p for d in ("specs", "tests/verify/specs", "tests/golden/explain", "tests/golden/plans")
               for p in (ROOT / d).glob("*.yaml"))


@lru_cache(maxsize=None)
def view_of(path: Path) -> PlanView | None:
    try:
        return PlanView(compile(load_spec(path)))
    except UserError:
        return None  # a spec the loader refuses (its own tests cover that)


def test_the_sweep_holds_sites_with_and_without_findings():
    views = [v for v in map(view_of, SPECS) if v is not None]
    proved = [agreement._proved(v, Digits.of(v.families, v.world_size), s, v.plan.relay.get(s.name))
              for v in views for s in v.plan.sites if s.kind == "broadcast"]
    assert len(views) >= 40 and proved.count(True) > 100 and proved.count(False) > 10


@pytest.fixture(params=SPECS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def planned(request):
    """A spec of the sweep planned: its view and the digits of its families."""
    view = view_of(request.param)
    if view is None:
        pytest.skip("not a plannable single-instance spec")
    return view, Digits.of(view.families, view.world_size)


def test_agreement_proof_matches_following_every_rank(planned):
    view, digits = planned
    assert digits is not None, "planner families always share digits"
    for site in view.plan.sites:
        if site.kind != "broadcast":
            continue
        relay = view.plan.relay.get(site.name)
        listed = agreement._judge(view, site, agreement._follow(view, site, relay), relay)
        assert agreement._proved(view, digits, site, relay) == (not listed), (site.name, listed)


def test_stages_sharing_a_group_match_the_rank_lists(planned):
    view, digits = planned
    for name in view.families:
        replicas = {view.replicas[r] for g in view.groups(name) for r in g[:1]}
        spans = any(len({view.replicas[r] for r in g}) > 1 for g in view.groups(name))
        assert bool(digits.group(name) - digits.group("replica")) == spans, name
        for stage in range(view.pp):
            listed = {view.stages[r] for g in view.groups(name)
                      if stage in {view.stages[x] for x in g} for r in g}
            assert schedules._stages_sharing(view, digits, name, stage) == listed, (name, stage)
        assert replicas


def _rules():
    for ndim in (1, 2, 3):
        for shape in itertools.product((1, 2, 3, 4), repeat=ndim):
            for strides in itertools.product((0, 1, 2, 3, 4, 6, 8, 12), repeat=ndim):
                yield shape, strides


def test_partition_by_strides_matches_the_listed_groups():
    seen = {True: 0, False: 0}
    for shape, strides in _rules():
        for group_ndim in range(1, len(shape) + 1):
            fam = Family("f", shape, strides, group_ndim)
            world = math.prod(shape)
            listed = sorted(r for g in fam.groups() for r in g) == list(range(world))
            assert partitions(fam, world) == listed, (shape, strides, group_ndim)
            seen[listed] += 1
    assert seen[True] > 100 and seen[False] > 1000


def test_digits_refuse_radices_that_do_not_nest():
    # groups of 2 and of 3 over 6 ranks: breakpoints 1, 2, 3, 6, and 3 is no multiple of 2
    fams = {"a": Family("a", (3, 2), (2, 1), 1), "b": Family("b", (2, 3), (3, 1), 1)}
    assert Digits.of(fams, 6) is None
    assert Digits.of({"a": fams["a"]}, 6) is not None


def test_member_and_value_invert_the_rule():
    # the module docstring's 8 ranks: sglang tp=4, pp=2
    fams = {"tp": Family("tp", (2, 4), (4, 1), 1), "pp": Family("pp", (4, 2), (1, 4), 1)}
    digits = Digits.of(fams, 8)
    assert digits.sizes == [4, 2] and digits.group("tp") == {0} and digits.group("pp") == {1}
    assert digits.member("pp", 1) == {1: 1} and digits.member("tp", 2) == {0: 2}
    assert digits.value(digits.group_digits["tp"], {0: 3}) == 3
