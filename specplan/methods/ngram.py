"""NGRAM: drafts looked up in a per-rank n-gram index of the committed tokens; each engine
verifies them its own way, so the method has a chain shape beside its trie (`Method.variants`;
each engine's row names the shape it runs: engines/<engine>/methods.py).

SGLang (NGRAM): each rank keeps its own C++ corpus (reference/decisions.md §2) and drafts an
irregular tree: draft_tokens and a tree_mask, which agree only while every corpus saw the same
committed tokens; nothing converges them in SGLang [GAP-soft]. The tree is a BFS trie of
num_draft_tokens nodes, root included (ngram_corpus trie.cpp: each node keeps between
min_bfs_breadth and max_bfs_breadth = topk children, to at most max_trie_depth levels, until
the nodes run out), so num_draft_tokens is bounded by nothing but itself; SGLang derives
num_steps = num_draft_tokens // topk (_handle_ngram) and never reads it, so 0 is valid. Accept is the EAGLE accept
kernel with the same broadcasts, accept_index [bs, num_draft_tokens] (max tree depth N).

vLLM (NGRAM_CHAIN): V2's ngram speculator matches the request's own tokens on each rank and
proposes a chain of num_speculative_tokens drafts, [bs, K]; no tree mask (vLLM verifies chains
only). The chain RejectionSampler verifies without draft probabilities; the accept is
vLLM's triple, as for the EAGLE family.

Neither has a draft forward or a draft extend. Chosen here: ngram_draft is a per-round host
site; it joins the "rng" preset (values not a pure function of logits), not "init", which
SGLang keeps for start-up probes.
"""

from ._common import COMMIT_DERIVES, first_token, presets_for, target_prefill_phase
from .base import Decision, Method, Phase, Site

_DRAFT = ("draft_tokens", "tree_mask")
_ACCEPT = ("predict", "accept_index", "num_correct_drafts")
_ACCEPT_DOC = "Verify-kernel output; rng on the sampling path, float on the greedy path."
_TOKEN, _TARGET_SITE = first_token(
    "ngram",
    doc="Generic sampler: unconverged by default [GAP-soft] (decisions.md §0.3).")
_TREE = ("positions", "retrive_index", "retrive_next_token", "retrive_next_sibling",
         "cache_locations")


def _decisions() -> tuple[Decision, ...]:
    return (
        _TOKEN,
        Decision("draft_tokens", ("bs * num_draft_tokens",), "int64", "host", "draft",
                 site="ngram_draft", derives=_TREE,
                 doc="ngram_corpus.batch_get on the host of every rank."),
        Decision("tree_mask", ("bs * num_draft_tokens * num_draft_tokens",), "bool", "host",
                 "draft", site="ngram_draft", derives=_TREE,
                 doc="Irregular tree (tree_topk = -1) from the same lookup."),
        Decision("predict", ("bs * num_draft_tokens",), "int32", "rng", "accept",
                 site="ngram_accept", derives=("out_tokens", "bonus_tokens"), doc=_ACCEPT_DOC),
        Decision("accept_index", ("bs", "num_draft_tokens"), "int32", "rng", "accept",
                 site="ngram_accept", derives=("out_tokens", "tree_compaction", "kv_move"),
                 doc=_ACCEPT_DOC),
        Decision("num_correct_drafts", ("bs",), "int32", "rng", "accept", site="ngram_accept",
                 derives=("accept_lens",) + COMMIT_DERIVES + ("ngram_corpus_update",),
                 doc=_ACCEPT_DOC),
    )


def _sites() -> tuple[Site, ...]:
    return (
        _TARGET_SITE,
        Site("ngram_draft", "draft", _DRAFT, presets=presets_for("host"),
             doc="Per-rank corpus lookup; SGLang never converges it [GAP-soft]."),
        Site("ngram_accept", "accept", _ACCEPT, presets=presets_for("rng"), accept="path",
             doc="eagle_sample's broadcasts: every sampling path (target-only tree sampling, no "
                 "draft probs); the greedy path only on HIP."),
    )


def _chain_decisions() -> tuple[Decision, ...]:
    return (
        _TOKEN,
        Decision("draft_tokens", ("bs", "num_draft_tokens - 1"), "int64", "host", "draft",
                 site="ngram_draft", derives=("positions", "cache_locations"),
                 doc="The ngram speculator's match over each rank's own copy of the request's "
                     "tokens: a chain of num_speculative_tokens drafts."),
        Decision("predict", ("bs * num_draft_tokens",), "int32", "rng", "accept",
                 site="ngram_accept", derives=("out_tokens", "bonus_tokens"), doc=_ACCEPT_DOC),
        Decision("accept_index", ("bs", "num_draft_tokens"), "int32", "rng", "accept",
                 site="ngram_accept", derives=("out_tokens",), doc=_ACCEPT_DOC),
        Decision("num_correct_drafts", ("bs",), "int32", "rng", "accept", site="ngram_accept",
                 derives=("accept_lens",) + COMMIT_DERIVES, doc=_ACCEPT_DOC),
    )


NGRAM_CHAIN = Method(
    name="ngram",
    prefill=(target_prefill_phase(),),
    decode=(
        Phase("draft", ("draft_tokens",)),  # on every rank, from its own token history
        Phase("plan_verify"),  # the chain's verify inputs laid out (positions, slots)
        Phase("target_verify", compute="target_verify",
              tokens_per_request="num_draft_tokens", forwards="1", stage="all"),
        Phase("accept", _ACCEPT),
        Phase("commit"),
    ),
    decisions=_chain_decisions(),
    sites=(
        _TARGET_SITE,
        Site("ngram_draft", "draft", ("draft_tokens",), presets=presets_for("host"),
             doc="Per-rank match over the request's tokens; vLLM never converges it."),
        Site("ngram_accept", "accept", _ACCEPT, presets=presets_for("rng"), accept="path",
             doc="vLLM's chain RejectionSampler output (sampled tokens and counts)."),
    ),
    needs_taps=False, tree=False, drafter="lookup", title="n-gram",
    doc="N-gram lookup drafting, verified as a chain (vLLM's shape: engines/vllm/methods.py).",
)

NGRAM = Method(
    name="ngram",
    prefill=(target_prefill_phase(),),
    decode=(
        # The lookup runs on the host of every rank: no forward, no single drafting stage.
        Phase("draft", _DRAFT),
        Phase("plan_verify"),  # reconstruct_indices_from_tree_mask
        Phase("target_verify", compute="target_verify",
              tokens_per_request="num_draft_tokens", forwards="1", stage="all"),
        Phase("accept", _ACCEPT),
        Phase("commit"),  # accepted KV moved to the front, corpus updated
    ),
    decisions=_decisions(),
    sites=_sites(),
    needs_taps=False, tree=True, trie=True, drafter="lookup", title="n-gram",
    doc="N-gram lookup drafting with tree verify.",
    variants={"chain": NGRAM_CHAIN},
)
