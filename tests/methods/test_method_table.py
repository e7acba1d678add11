"""The catalog, written out by hand from reference/decisions.md, so any drift in it fails here.

One row per site: (site, decisions in broadcast order, presets besides "all", SGLang converges
by default). One row per decision: (shape, dtype, nature, path, readers).
"""

import pytest

from specplan.engines.sglang.convention import SGLang
from specplan.engines.vllm.convention import VLLM
from specplan.methods import METHODS, get_method

R, I = frozenset({"rng"}), frozenset({"init", "rng"})
NONE_P = frozenset()
ACCEPT = ("predict", "accept_index", "num_correct_drafts")
DRAFT = ("draft_tokens", "parent_list", "top_scores_index")


def _eagle_sites(m):
    return [
        (f"{m}_target", ("next_token_ids",), R, False),
        (f"{m}_draft_extend", ("topk_index", "topk_p"), NONE_P, False),
        (f"{m}_draft", DRAFT, NONE_P, False),
        (f"{m}_accept", ACCEPT, R, True),
    ]


SITES = {
    "none": [("none_target", ("next_token_ids",), R, False)],
    **{m: _eagle_sites(m) for m in ("eagle", "eagle3", "mtp", "standalone")},
    "ngram": [
        ("ngram_target", ("next_token_ids",), R, False),
        ("ngram_draft", ("draft_tokens", "tree_mask"), R, False),
        ("ngram_accept", ACCEPT, R, True),
    ],
    "dflash": [
        ("dflash_target", ("next_token_ids",), R, True),
        ("dflash_draft", ("draft_tokens",), NONE_P, True),
        ("dflash_accept_greedy", ("target_predict",), NONE_P, True),
        ("dflash_accept_sample", ("accept_len", "bonus"), R, True),
        ("dflash_mem", ("free_mem_gb",), I, True),
    ],
    "dspark": [
        ("dspark_target", ("next_token_ids",), R, True),
        ("dspark_draft", ("draft_tokens",), NONE_P, True),
        ("dspark_plan_verify", ("verify_budget",), NONE_P, False),
        ("dspark_plan", ("verify_lens",), NONE_P, True),
        ("dspark_accept_greedy", ("correct_len_greedy", "bonus_greedy",
                                  "cap_trim_lens_greedy"), NONE_P, True),
        ("dspark_accept_sample", ("correct_len_sample", "bonus_sample",
                                  "cap_trim_lens_sample"), R, True),
        ("dspark_mem", ("free_mem_gb",), I, True),
    ],
}

BS = ("bs",)
TOKEN = {"next_token_ids": (BS, "int64", "rng", "any", "all_stages")}


def _eagle_decisions():
    return {
        **TOKEN,
        "topk_index": (("bs", "topk"), "int64", "float", "any", "last_stage"),
        "topk_p": (("bs", "topk"), "float32", "float", "any", "last_stage"),
        "draft_tokens": (("bs", "num_draft_tokens - 1"), "int64", "float", "any", "all_stages"),
        "parent_list": (("bs", "(num_steps - 1) * topk + 1 - 1 // num_steps"), "int64", "float", "any",
                        "all_stages"),
        "top_scores_index": (("bs", "num_draft_tokens - 1"), "int64", "float", "any",
                             "all_stages"),
        "predict": (("bs * num_draft_tokens",), "int32", "rng", "any", "all_stages"),
        "accept_index": (("bs", "num_steps + 1"), "int32", "rng", "any", "all_stages"),
        "num_correct_drafts": (BS, "int32", "rng", "any", "all_stages"),
        "adaptive_num_steps": ((), "int32", "deterministic", "any", "all_stages"),
    }


def _dspark_accept(suffix, path, nature):
    return {
        f"correct_len_{suffix}": (BS, "int32", nature, path, "all_stages"),
        f"bonus_{suffix}": (BS, "int64", nature, path, "all_stages"),
        f"cap_trim_lens_{suffix}": (BS, "int32", nature, path, "all_stages"),
    }


MEM = {"free_mem_gb": ((), "float32", "host", "any", "last_stage")}
DECISIONS = {
    "none": {"next_token_ids": (BS, "int64", "rng", "any", "all_stages")},
    **{m: _eagle_decisions() for m in ("eagle", "eagle3", "mtp", "standalone")},
    "ngram": {
        **TOKEN,
        "draft_tokens": (("bs * num_draft_tokens",), "int64", "host", "any", "all_stages"),
        "tree_mask": (("bs * num_draft_tokens * num_draft_tokens",), "bool", "host", "any",
                      "all_stages"),
        "predict": (("bs * num_draft_tokens",), "int32", "rng", "any", "all_stages"),
        "accept_index": (("bs", "num_draft_tokens"), "int32", "rng", "any", "all_stages"),
        "num_correct_drafts": (BS, "int32", "rng", "any", "all_stages"),
    },
    "dflash": {
        **TOKEN, **MEM,
        "draft_tokens": (("bs", "num_draft_tokens"), "int64", "float", "any", "all_stages"),
        "target_predict": (("bs", "num_draft_tokens"), "int64", "float", "greedy",
                           "all_stages"),
        "accept_len": (BS, "int32", "rng", "sampling", "all_stages"),
        "bonus": (BS, "int64", "rng", "sampling", "all_stages"),
    },
    "dspark": {
        **TOKEN, **MEM,
        "draft_tokens": (("bs", "num_steps"), "int64", "float", "any", "all_stages"),
        "verify_budget": ((), "int32", "float", "any", "all_stages"),
        "verify_lens": (BS, "int32", "float", "any", "all_stages"),
        "greedy_mask": (BS, "bool", "deterministic", "any", "all_stages"),
        **_dspark_accept("greedy", "greedy", "float"),
        **_dspark_accept("sample", "sampling", "rng"),
    },
}

FLAGS = {  # needs_taps, tree, drafter, SGLang's group, SGLang's PP, vLLM's PP (their rows)
    "none": (False, False, "none", "attn_tp_or_tp", "yes", "yes"),
    "eagle": (False, True, "head", "attn_tp_or_tp", "gated", "yes"),
    "eagle3": (True, True, "head", "attn_tp_or_tp", "no", "yes"),
    "mtp": (False, True, "head", "attn_tp_or_tp", "gated", "yes"),
    "standalone": (False, True, "model", "attn_tp_or_tp", "no", "yes"),
    "ngram": (False, True, "lookup", "attn_tp_or_tp", "no", "yes"),
    "dflash": (True, False, "head", "attn_tp_or_tp", "no", "yes"),
    "dspark": (True, False, "head", "attn_tp_or_tp", "prefill_only", "yes"),
}


def test_catalog_names():
    assert set(METHODS) == set(SITES) == set(DECISIONS) == set(FLAGS)
    assert list(METHODS) == ["none", "eagle", "eagle3", "mtp", "standalone", "ngram",
                             "dflash", "dspark"]


@pytest.mark.parametrize("name", sorted(SITES))
def test_sites_match_table(name):
    method = get_method(name)
    sglang = SGLang.methods[name].default_sites
    got = [(s.name, s.decisions, s.presets, s.name in sglang) for s in method.sites]
    assert got == SITES[name]


@pytest.mark.parametrize("name", sorted(DECISIONS))
def test_decisions_match_table(name):
    method = get_method(name)
    got = {d.name: (d.shape, d.dtype, d.nature, d.path, d.readers) for d in method.decisions}
    assert got == DECISIONS[name]


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_method_flags_match_table(name):
    m, row = get_method(name), SGLang.methods[name]
    got = (m.needs_taps, m.tree, m.drafter, row.group, row.pp, VLLM.methods[name].pp)
    assert got == FLAGS[name]


@pytest.mark.parametrize("name", ["eagle", "eagle3", "mtp", "standalone"])
def test_eagle_family_phases(name):
    decode = [(p.name, p.compute, p.tokens_per_request, p.forwards, p.stage)
              for p in get_method(name).decode]
    assert decode == [
        ("draft", "draft_forward", "topk", "num_steps - 1", "last"),
        ("plan_verify", None, "0", "0", "all"),
        ("target_verify", "target_verify", "num_draft_tokens", "1", "all"),
        ("accept", None, "0", "0", "all"),
        ("commit", None, "0", "0", "all"),
        ("draft_extend", "draft_extend", "num_draft_tokens", "1", "last"),
    ]
    assert [p.name for p in get_method(name).prefill] == ["target", "draft_extend"]


@pytest.mark.parametrize(("name", "order"), [
    ("dspark", ["plan_window", "draft", "plan_verify", "target_verify", "accept", "commit",
                "draft_extend"]),
    ("dflash", ["plan_verify", "draft", "target_verify", "accept", "commit", "draft_extend"]),
    ("ngram", ["draft", "plan_verify", "target_verify", "accept", "commit"]),
    ("none", ["target", "commit"]),
])
def test_other_decode_phases(name, order):
    assert [p.name for p in get_method(name).decode] == order


def test_block_methods_draft_in_one_forward():
    for name in ("dspark", "dflash"):
        draft = next(p for p in get_method(name).decode if p.name == "draft")
        assert (draft.tokens_per_request, draft.forwards, draft.stage) == \
            ("num_draft_tokens", "1", "last")


def test_get_method_names_valid_choices():
    with pytest.raises(KeyError) as err:
        get_method("medusa")
    message = str(err.value)
    assert "medusa" in message
    assert all(name in message for name in METHODS)
