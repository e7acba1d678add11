"""The EAGLE round shared by eagle, eagle3, mtp and standalone (reference/decisions.md §1).

SGLang runs all four through one worker: S-1 draft forwards, a tree (or chain) verify, the
accept kernel in `eagle_sample`, commit, and a draft extend that proposes the next round's
level-0 tokens. Only the drafter's inputs differ (last hidden state, taps, its own model), so
the records differ only in names, notes and flags, which `build` takes.
"""

from __future__ import annotations

from ._common import COMMIT_DERIVES, first_token, presets_for, target_prefill_phase
from .base import Decision, Method, Phase, Site

ACCEPT_ORDER = ("predict", "accept_index", "num_correct_drafts")  # eagle_sample's broadcasts
DRAFT_ORDER = ("draft_tokens", "parent_list", "top_scores_index")  # the PP relay's order
PROPOSAL_ORDER = ("topk_index", "topk_p")

ACCEPT_SGLANG_NOTE = (
    "eagle_sample broadcasts predict, accept_index, num_correct_drafts from group rank 0 over "
    "attn_tp (DP-attention) or tp on every sampling path; the greedy path (all-greedy batches, "
    "and always on CPU/XPU) broadcasts only on HIP, so CUDA/NPU/CPU greedy rely on bit-identical "
    "logits [GAP].")


def _draft_decisions(method: str) -> tuple[Decision, ...]:
    site = f"{method}_draft"
    tree = ("tree_mask", "positions", "retrive_index", "retrive_next_token",
            "retrive_next_sibling")
    return (
        Decision("draft_tokens", ("bs", "num_draft_tokens - 1"), "int64", "float", "draft",
                 site=site, derives=tree + ("cache_locations",),
                 doc="Selected drafts (top num_draft_tokens-1 of the tree scores; a chain's "
                     "S tokens). float (argmax/top-k); rng under speculative_use_rejection_"
                     "sampling. Never converged by SGLang [GAP]; stage 0 embeds them."),
        # organize_draft_results concatenates every step's parents but the last: topk + 1 for
        # step 0, topk per later step, none at all for one step (1 // num_steps is 1 only then).
        Decision("parent_list", ("bs", "(num_steps - 1) * topk + 1 - 1 // num_steps"), "int64",
                 "float", "draft", site=site, derives=tree, tree_only=True,
                 doc="Tree topology from organize_draft_results (width 0 when num_steps == 1); "
                     "a chain uses a constant preallocation. Relayed under PP."),
        Decision("top_scores_index", ("bs", "num_draft_tokens - 1"), "int64", "float", "draft",
                 site=site, derives=tree, tree_only=True,
                 doc="Sorted top-k of float path scores choosing the tree's nodes; constant "
                     "arange for a chain. Relayed under PP."),
    )


def _proposal_decisions(method: str) -> tuple[Decision, ...]:
    site = f"{method}_draft_extend"
    doc = ("Level-0 proposal of the next round, from the draft extend. float (fast_topk; "
           "argmax-only on HIP), rng under rejection sampling. Never converged [GAP].")
    return (
        Decision("topk_index", ("bs", "topk"), "int64", "float", "draft_extend", site=site,
                 readers="last_stage", derives=("draft_tokens",), doc=doc),
        Decision("topk_p", ("bs", "topk"), "float32", "float", "draft_extend", site=site,
                 readers="last_stage", derives=("tree_scores",), doc=doc),
    )


def _accept_decisions(method: str) -> tuple[Decision, ...]:
    site = f"{method}_accept"
    doc = ("Output of the verify kernel; rng on the sampling path (coins), float on the greedy "
           "path (argmax + verify_tree_greedy).")
    return (
        Decision("predict", ("bs * num_draft_tokens",), "int32", "rng", "accept", site=site,
                 derives=("out_tokens", "bonus_tokens"), doc=doc),
        Decision("accept_index", ("bs", "num_steps + 1"), "int32", "rng", "accept", site=site,
                 derives=("out_tokens", "bonus_tokens", "tree_compaction", "kv_move",
                          "mamba_commit"),
                 doc=doc + " Global node ids b*N+i of the accepted path, -1 padded."),
        Decision("num_correct_drafts", ("bs",), "int32", "rng", "accept", site=site,
                 derives=("accept_lens",) + COMMIT_DERIVES + ("draft_extend_inputs",),
                 doc=doc + " accept_lens = num_correct_drafts + 1."),
    )


def _adaptive_steps() -> Decision:
    return Decision(
        "adaptive_num_steps", (), "int32", "deterministic", "commit",
        derives=("num_steps", "draft_graph_choice"),
        doc="speculative_adaptive only: next num_steps, a pure function of the converged "
            "num_correct_drafts and bs, so every rank computes it alone.")


def _phases() -> tuple[tuple[Phase, ...], tuple[Phase, ...]]:
    extend = Phase("draft_extend", PROPOSAL_ORDER, compute="draft_extend",
                   tokens_per_request="num_draft_tokens", forwards="1", stage="last")
    prefill = (
        target_prefill_phase(),
        Phase("draft_extend", PROPOSAL_ORDER, compute="draft_extend",
              tokens_per_request="1", forwards="1", stage="last"),
    )
    decode = (
        Phase("draft", DRAFT_ORDER, compute="draft_forward", tokens_per_request="topk",
              forwards="num_steps - 1", stage="last"),
        Phase("plan_verify"),  # tree mask, positions, out_cache_loc: materialized from drafts
        Phase("target_verify", compute="target_verify",
              tokens_per_request="num_draft_tokens", forwards="1", stage="all"),
        Phase("accept", ACCEPT_ORDER),
        Phase("commit", ("adaptive_num_steps",)),
        extend,
    )
    return prefill, decode


def _sites(method: str) -> tuple[Site, ...]:
    return (
        Site(f"{method}_draft_extend", "draft_extend", PROPOSAL_ORDER,
             presets=presets_for("float"),
             doc="Not converged by SGLang; under PP's default (PD prefill) mode the last "
                 "stage relays it so every stage rebuilds the same draft input."),
        Site(f"{method}_draft", "draft", DRAFT_ORDER, presets=presets_for("float"),
             doc="Not converged within TP by SGLang [GAP]; under SGLANG_ENABLE_PP_SPEC the "
                 "last stage relays these to earlier stages (TP-sliced wire)."),
        Site(f"{method}_accept", "accept", ACCEPT_ORDER, presets=presets_for("rng"),
             accept="path", doc=ACCEPT_SGLANG_NOTE),
    )


def build(name: str, *, drafter: str, needs_taps: bool, title: str, doc: str,
          own_layers: bool = False, without_draft: str | None = None) -> Method:
    """One EAGLE-family method; every site name is prefixed by `name`."""
    token, target_site = first_token(
        name,
        doc="Generic sampler: synced (all_reduce MIN) only with SYNC_TOKEN_IDS_ACROSS_TP or a "
            "grammar, so unconverged by default [GAP-soft] (decisions.md §0.3).")
    prefill, decode = _phases()
    return Method(
        name=name, prefill=prefill, decode=decode,
        decisions=(token, *_proposal_decisions(name), *_draft_decisions(name),
                   *_accept_decisions(name), _adaptive_steps()),
        sites=(target_site, *_sites(name)),
        needs_taps=needs_taps, tree=True, drafter=drafter,  # type: ignore[arg-type]
        own_layers=own_layers, without_draft=without_draft, title=title, doc=doc)
