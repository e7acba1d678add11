"""assign_groups: each site's family holds exactly one replica's reading ranks; the source
is the replica's first rank on the last stage."""

from __future__ import annotations

from specplan.mesh.family import Family

DPATTN = """\
name: dpattn
engine: sglang
topology: {tp: 8, dp: 4, dp_attention: true}
model: {num_layers: 8, hidden_size: 64, vocab_size: 128}
speculative: {method: dspark, num_steps: 3}
runtime: {max_batch: 4}
"""


def test_dp_attention_sites_use_attn_tp_ranks(planned):
    s = planned(DPATTN, upto="assign_groups").draft
    replica: Family = s.families["replica"]
    assert replica.groups() == [[0, 1], [2, 3], [4, 5], [6, 7]] == s.families["attn_tp"].groups()
    assert {e.family for e in s.sites.values()} == {"replica"}
    assert {e.source_member for e in s.sites.values()} == {0}


PP = """\
name: pp
engine: vllm
topology: {tp: 2, pp: 3, dp: 2}
model: {num_layers: 9, hidden_size: 64, vocab_size: 128}
speculative: {method: eagle, num_steps: 2}
runtime: {max_batch: 4}
"""


def test_pp_sites_converge_over_the_replica_from_the_last_stage(planned):
    s = planned(PP, upto="assign_groups").draft
    groups = s.families["replica"].groups()
    assert groups == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]
    accept = s.sites["eagle_accept"]
    assert (accept.family, accept.source_member, accept.readers) == ("replica", 4, "all_stages")
    assert [g[accept.source_member] for g in groups] == [4, 10]
    # the draft-extend proposal is read on the last stage only
    extend = s.sites["eagle_draft_extend"]
    assert (extend.family, extend.source_member, extend.readers) == ("replica_stage", 0, "last_stage")


def test_column_relay_keeps_readers_on_every_stage(planned):
    s = planned(PP + "pipeline: {relay: column}\n", upto="assign_groups").draft
    accept = s.sites["eagle_accept"]
    assert (accept.family, accept.readers) == ("replica_stage", "all_stages")
