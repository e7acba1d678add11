"""DFlash: one draft forward over a block [bonus | mask*], verified as a causal chain.

Facts: reference/decisions.md §3 and §0.1. num_draft_tokens is the block size B (column 0 is
the previous bonus). SGLang converges on the full TP group (SpecTpSync(get_tp_group())), not
attn_tp, and requires pp == 1. One kv_loc_plan serves draft, verify and KV writes, so the
block is planned before the draft forward; it is a pure function of new_seq_lens.

Left out of the records (SGLang options that replace a default site; a plan would otherwise
count both): DFLASH_SELECTOR (selector/LiLiCorr sampled accept, same accept_len and bonus,
presets all and rng) — see SGLang's row (engines/sglang/methods.py `variants_note`).
"""

from ._common import (ALL_ONLY, COMMIT_DERIVES, RNG_PRESETS, first_token, free_memory,
                      target_prefill_phase)
from .base import Decision, Method, Phase, Site

_TOKEN, _TARGET_SITE = first_token("dflash",
                                   doc="DFLASH_TARGET (16): prefill next_token_ids; all and rng.")


def _decisions() -> tuple[Decision, ...]:
    return (
        Decision("draft_tokens", ("bs", "num_draft_tokens"), "int64", "float", "draft",
                 site="dflash_draft", derives=("out_tokens", "verify_candidates"),
                 doc="Greedy vocab-parallel head: all_gather of (max, id) over tp, first max "
                     "wins, so ranks agree by construction. Selector/LiLiCorr sampled drafts "
                     "draw torch RNG with no site [GAP]."),
        Decision("target_predict", ("bs", "num_draft_tokens"), "int64", "float", "accept",
                 site="dflash_accept_greedy", path="greedy",
                 derives=("accept_len", "bonus") + COMMIT_DERIVES + ("draft_kv",),
                 doc="Argmax of target logits, broadcast before the greedy accept; accept while "
                     "drafts[:,1:] == target_predict[:,:-1], bonus = target_predict[correct_len]."),
        Decision("accept_len", ("bs",), "int32", "rng", "accept", site="dflash_accept_sample",
                 path="sampling", derives=COMMIT_DERIVES + ("draft_kv",),
                 doc="Target-only chain sampling (torch.rand coins) over float target probs."),
        Decision("bonus", ("bs",), "int64", "rng", "accept", site="dflash_accept_sample",
                 path="sampling", derives=("out_tokens", "next_draft_input"),
                 doc="Token sampled after the accepted prefix."),
    )


def _sites() -> tuple[Site, ...]:
    return (
        _TARGET_SITE,
        Site("dflash_draft", "draft", ("draft_tokens",), presets=ALL_ONLY,
             doc="Not a SpecTpSync site in 0.5.23: the greedy head's all_gather converges "
                 "the drafts (decisions.md §0.4)."),
        Site("dflash_accept_greedy", "accept", ("target_predict",), presets=ALL_ONLY,
             accept="target_predict", doc="DFLASH_ACCEPT_GREEDY (15): all only."),
        Site("dflash_accept_sample", "accept", ("accept_len", "bonus"), presets=RNG_PRESETS,
             accept="count_bonus", doc="DFLASH_ACCEPT_SAMPLE (14): all and rng."),
    )


_MEM_DECISION, _MEM_SITE = free_memory("dflash", "tp")

DFLASH = Method(
    name="dflash",
    prefill=(
        target_prefill_phase(),
        # The prompt's target hidden states are appended into the draft KV.
        Phase("draft_extend", compute="draft_extend", tokens_per_request="1", forwards="1",
              stage="last"),
    ),
    decode=(
        Phase("plan_verify"),  # block ids, positions_2d, verify_out_cache_loc_2d
        Phase("draft", ("draft_tokens",), compute="draft_forward",
              tokens_per_request="num_draft_tokens", forwards="1", stage="last"),
        Phase("target_verify", compute="target_verify",
              tokens_per_request="num_draft_tokens", forwards="1", stage="all"),
        Phase("accept", ("target_predict", "accept_len", "bonus")),
        Phase("commit"),  # out_tokens, commit_lens = accept_len + 1, new_seq_lens
        Phase("draft_extend", compute="draft_extend", tokens_per_request="num_draft_tokens",
              forwards="1", stage="last"),  # target hidden of committed rows -> draft KV
    ),
    decisions=(_TOKEN, *_decisions(), _MEM_DECISION),
    sites=(*_sites(), _MEM_SITE),
    needs_taps=True, tree=False, drafter="head", round="block", draft_root=True, title="DFlash",
    doc="DFlash block drafting with a chain verify.",
)
