"""What the code asks of a method is a field of the method (issue 25): the round it runs, its
drafter, its accept sites' layouts. Each field is checked against the decisions it describes."""

from __future__ import annotations

import pytest

from specplan.methods import METHODS

ENGINES = (None, "sglang", "vllm")
ALL = [(name, engine) for name in METHODS for engine in ENGINES]


def _as_run(name: str, engine: str | None):
    """The method as `engine` runs it (its row's variant); None: as specplan writes it."""
    from specplan.engines import convention

    return METHODS[name] if engine is None else convention(engine).method(name)


@pytest.mark.parametrize("name,engine", ALL)
def test_every_accept_site_names_its_layout_and_the_decisions_fit_it(name, engine):
    m = _as_run(name, engine)
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
    m = _as_run(name, engine)
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


def test_what_the_launch_lines_ask_of_a_method():
    assert [n for n, m in METHODS.items() if m.draft_model] == [
        "eagle", "eagle3", "mtp", "standalone", "dflash", "dspark"]
    assert [n for n, m in METHODS.items() if m.needs_draft_checkpoint] == [
        "eagle", "eagle3", "standalone", "dflash", "dspark"]
    assert [n for n, m in METHODS.items() if m.own_layers] == ["mtp"]
    assert {n: m.without_draft for n, m in METHODS.items() if m.without_draft} == {"eagle": "mtp"}
    assert all(METHODS[m.without_draft].own_layers for m in METHODS.values() if m.without_draft)
    assert all(m.title for m in METHODS.values())


@pytest.mark.parametrize("name,engine", [(n, e) for n, e in ALL if e])
def test_an_engine_names_every_method_that_drafts(name, engine):
    from specplan.engines import convention

    names = convention(engine).method_names()
    assert (name in names) == METHODS[name].speculates
    assert convention(engine).method_named(names.get(name)) == (name if name in names else None)


def test_the_engines_names_are_their_rows():
    from specplan.engines import convention

    assert convention("sglang").method_names() == {
        "eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN", "standalone": "STANDALONE",
        "ngram": "NGRAM", "dflash": "DFLASH", "dspark": "DSPARK"}
    assert convention("vllm").method_names() == {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp",
                            "standalone": "draft_model", "ngram": "ngram", "dflash": "dflash",
                            "dspark": "dspark"}


@pytest.mark.parametrize("name,block", [("dflash", 5), ("dspark", 4)])
def test_a_block_methods_block_and_its_steps(name, block):
    m = METHODS[name]
    assert m.round == "block" and m.block_size(4) == block and m.steps_of_block(block) == 4


def test_only_block_methods_have_a_block():
    with pytest.raises(AssertionError, match="eagle drafts no block"):
        METHODS["eagle"].block_size(3)


def test_sglang_spec_tp_sync_covers_the_methods_with_its_sites():
    from specplan.engines.sglang import spec_tp_sync

    assert [n for n, m in METHODS.items() if spec_tp_sync.has_sites(m)] == ["dflash", "dspark"]
