"""derive_commit reads an accept site's layout from its method (Site.accept), never from the
decisions' names: each layout commits the tokens its decisions say."""

from __future__ import annotations

import pytest

from specplan.methods import get_method
from specplan.methods.base import Site

torch = pytest.importorskip("torch")

from specplan.runtime.commit import derive_commit, fired  # noqa: E402


def test_a_path_site_commits_the_tokens_along_the_accepted_path():
    site = get_method("ngram").variants["chain"].site("ngram_accept")
    dec = {"predict": torch.tensor([5, 6, 7, 8, 9, 1, 2, 3], dtype=torch.int32),
           "accept_index": torch.tensor([[0, 1, -1], [4, -1, -1]], dtype=torch.int32),
           "num_correct_drafts": torch.tensor([1, 0], dtype=torch.int32)}
    got = derive_commit(site, dec, torch.tensor([10, 20], dtype=torch.int32))
    assert got.out_tokens.tolist() == [[5, 6, -1], [9, -1, -1]]
    assert got.commit_lens.tolist() == [2, 1] and got.new_seq_lens.tolist() == [12, 21]


def test_a_count_bonus_site_commits_the_accepted_drafts_and_the_bonus():
    site = get_method("dspark").site("dspark_accept_sample")
    dec = {"correct_len_sample": torch.tensor([2, 0], dtype=torch.int32),
           "bonus_sample": torch.tensor([99, 77]),
           "cap_trim_lens_sample": torch.tensor([1, 0], dtype=torch.int32)}
    drafts = torch.tensor([[21, 22, 23], [31, 32, 33]])
    got = derive_commit(site, dec, torch.tensor([4, 4], dtype=torch.int32), drafts)
    assert got.out_tokens.tolist() == [[21, 22, 99, -1], [77, -1, -1, -1]]
    assert got.commit_lens.tolist() == [3, 1] and got.cap_trim_lens.tolist() == [1, 0]


def test_a_target_predict_site_accepts_the_drafts_the_target_agrees_with():
    site = get_method("dflash").site("dflash_accept_greedy")
    drafts = torch.tensor([[1, 21, 22, 23], [1, 31, 32, 33]])  # column 0 is the root
    predict = torch.tensor([[21, 22, 50, 51], [60, 61, 62, 63]])
    got = derive_commit(site, {"target_predict": predict}, torch.tensor([0, 0], dtype=torch.int32),
                        drafts)
    assert got.out_tokens.tolist() == [[21, 22, 50, -1], [60, -1, -1, -1]]
    assert got.commit_lens.tolist() == [3, 1]


def test_the_layout_is_the_sites_not_the_names():
    """A site whose decisions carry other names is read by position (Site.accept)."""
    site = Site("x_accept", "accept", ("a", "b"), accept="count_bonus")
    dec = {"a": torch.tensor([1], dtype=torch.int32), "b": torch.tensor([9])}
    got = derive_commit(site, dec, torch.tensor([0], dtype=torch.int32), torch.tensor([[4, 5]]))
    assert got.out_tokens.tolist() == [[4, 9, -1]]


def test_a_chain_finalize_needs_the_drafts_and_a_non_accept_site_is_refused():
    site = get_method("dspark").site("dspark_accept_greedy")
    with pytest.raises(ValueError, match="dspark_accept_greedy: finalizing a chain accept needs"):
        derive_commit(site, {}, torch.tensor([0], dtype=torch.int32))
    with pytest.raises(ValueError, match="dspark_draft is not an accept site"):
        derive_commit(get_method("dspark").site("dspark_draft"), {}, torch.tensor([0]))


def test_fired_names_the_accept_site_of_a_boundary_and_refuses_alternatives():
    m = get_method("dspark")
    sites = {s.name: _PlanSite(s, m) for s in m.sites}
    name, mine = fired(sites, 3, {"correct_len_greedy": 1, "verify_lens": 2})
    assert name == "dspark_accept_greedy" and mine == {"correct_len_greedy": 1, "verify_lens": 2}
    with pytest.raises(ValueError, match="alternative accept sites"):
        fired(sites, 3, {"correct_len_greedy": 1, "bonus_sample": 2})
    assert fired(sites, "dspark_accept_sample", {"bonus_sample": 2, "x": 1}) == (
        "dspark_accept_sample", {"bonus_sample": 2})


class _PlanSite:
    """The plan's reading of a site: its decisions as objects with a name."""

    def __init__(self, site, method):
        self.name, self.phase = site.name, site.phase
        self.decisions = [method.decision(d) for d in site.decisions]
