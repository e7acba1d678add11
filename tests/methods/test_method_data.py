"""What the code asks of a method is a field of the method (issue 25): the round it runs, its
drafter, its accept sites' layouts. Each field is checked against the decisions it describes."""

from __future__ import annotations

import pytest

from specplan.methods import METHODS

ENGINES = (None, "sglang", "vllm")
ALL = [(name, engine) for name in METHODS for engine in ENGINES]


@pytest.mark.parametrize("name,engine", ALL)
def test_every_accept_site_names_its_layout_and_the_decisions_fit_it(name, engine):
    m = METHODS[name].for_engine(engine)
    for site in (s for s in m.sites if s.phase == "accept"):
        assert site.accept is not None, site.name
        if site.accept == "path":
            assert site.decisions == ("predict", "accept_index", "num_correct_drafts")
        elif site.accept == "target_predict":
            assert len(site.decisions) == 1
        else:  # count_bonus: the count first, then the bonus, then (DSpark) the cap trim
            assert 2 <= len(site.decisions) <= 3 and "bonus" in site.decisions[1]
    assert all(s.accept is None for s in m.sites if s.phase != "accept")


@pytest.mark.parametrize("name,engine", ALL)
def test_the_round_matches_the_sites(name, engine):
    m = METHODS[name].for_engine(engine)
    accepts = [s for s in m.sites if s.phase == "accept"]
    if m.round == "plain":
        assert not m.speculates and not accepts
        return
    assert m.speculates and accepts
    layouts = {s.accept for s in accepts}
    assert layouts == {"path"} if m.round == "draft_verify" else layouts <= {"count_bonus", "target_predict"}
    for sampled in (False, True):  # one accept site a round, the round's path's
        site = m.accept_site(sampled)
        paths = {m.decision(d).path for d in site.decisions}
        assert paths <= {"any", "sampling" if sampled else "greedy"}, (site.name, paths)


def test_the_fields_say_what_each_method_is():
    assert [n for n, m in METHODS.items() if m.extends_drafts] == ["eagle", "eagle3", "mtp", "standalone"]
    assert [n for n, m in METHODS.items() if m.plans_verify] == ["dspark"]
    assert [n for n, m in METHODS.items() if m.draft_root] == ["dflash"]
    assert {n: m.drafter for n, m in METHODS.items() if m.drafter in ("model", "lookup")} == {
        "standalone": "model", "ngram": "lookup"}
