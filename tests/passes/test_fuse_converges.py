"""fuse_converges: converges sharing group and source, with no dependency between them,
become one boundary; where they cannot, the plan names the dependency."""

from __future__ import annotations

DSPARK_TP4 = """\
name: dspark-tp4
engine: sglang
topology: {tp: 4}
model: {num_layers: 8, hidden_size: 64, vocab_size: 128}
speculative: {method: dspark, num_steps: 3}
sync: {policy: all}
runtime: {max_batch: 4}
"""


def test_dspark_accept_triple_is_one_broadcast(planned):
    s = planned(DSPARK_TP4, upto="fuse_converges").draft
    got = [(b.round, b.op, b.sites) for b in s.boundaries]
    assert got == [
        ("startup", "all_reduce_min", ["dspark_mem"]),
        ("prefill", "broadcast", ["dspark_target"]),
        ("decode", "broadcast", ["dspark_draft"]),
        ("decode", "broadcast", ["dspark_plan_verify", "dspark_plan"]),
        ("decode", "broadcast", ["dspark_accept_greedy"]),
    ]
    assert s.sites["dspark_accept_greedy"].decisions == (
        "correct_len_greedy", "bonus_greedy", "cap_trim_lens_greedy")


def test_dspark_unfused_names_the_dependency(planned):
    s = planned(DSPARK_TP4, upto="fuse_converges").draft
    got = {(u.after, u.before): list(u.dependency) for u in s.unfused}
    assert got == {
        ("dspark_draft", "dspark_plan_verify"): [
            "converge:decode.dspark_draft@0", "materialize:decode.draft@0",
            "decision:decode.verify_budget@0"],
        ("dspark_plan_verify", "dspark_accept_greedy"): [
            "converge:decode.dspark_plan_verify@0", "materialize:decode.plan_verify@0",
            "compute:decode.target_verify@0", "decision:decode.correct_len_greedy@0"],
    }


def test_mixed_sampling_fuses_both_accept_sites(planned):
    s = planned(DSPARK_TP4.replace("num_steps: 3}", "num_steps: 3, sampling: mixed}"),
                upto="fuse_converges").draft
    assert s.boundaries[-1].sites == ["dspark_accept_greedy", "dspark_accept_sample"]


def test_trivial_groups_make_no_boundary(planned):
    s = planned(DSPARK_TP4.replace("tp: 4", "tp: 1"), upto="fuse_converges").draft
    assert s.boundaries == []
    assert all(e.trivial and e.boundary is None for e in s.sites.values())
