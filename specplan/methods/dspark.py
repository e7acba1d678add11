"""DSpark: one draft forward over [anchor | mask*], a Markov head of num_steps sequential
token steps, a confidence-driven ragged verify plan, and a chain accept.

Facts: reference/decisions.md §4 and §0.1. Symbols: num_steps = gamma (draft tokens per
round), num_draft_tokens = gamma + 1 (verify width V, with the bonus column). SGLang converges
on attn_tp (DP-attention) or tp; the drafter lives on the last PP stage; PP only on PD prefill.

Choices made here:
- The draft token is float, not rng: its noise is server-seeded counter Philox, identical on
  every rank, so ranks differ only through float logits; SGLang likewise keeps DSPARK_DRAFT
  out of the "rng" preset. SGLang broadcasts one [bs] step at a time (gamma broadcasts); the
  record holds their concatenation.
- The host verify budget feeds the target-verify graph tier (its token count) and SGLang
  converges it nowhere [GAP]; it gets its own site, dspark_plan_verify, outside SGLang's.
- correct_len, bonus and cap_trim_lens are converged at two path-specific sites, so each path
  has its own three decisions (`_greedy` / `_sample`). SGLang picks one site per round (greedy
  when the batch is all greedy), so a "mixed" spec carries both sites but fires one per round.
- DSPARK_ACCEPT_GRAPH (in-graph greedy epilogue) replaces dspark_accept_greedy when the accept
  is folded into the verify graph; it is left out of the records, so a plan does not count
  both (SGLang's row, engines/sglang/methods.py `variants_note`).
"""

from ._common import (ALL_ONLY, COMMIT_DERIVES, RNG_PRESETS, first_token, free_memory,
                      target_prefill_phase)
from .base import Decision, Method, Nature, Path, Phase, Site

_ACCEPT_NAMES = ("correct_len", "bonus", "cap_trim_lens")  # build_accept_outs' order
_TOKEN, _TARGET_SITE = first_token("dspark", doc="DSPARK_TARGET (11): all and rng.")


def _accept(suffix: str, path: Path, nature: Nature) -> tuple[Decision, ...]:
    site = f"dspark_accept_{suffix}"
    how = "greedy: float (argmax of target logits)" if path == "greedy" else \
        "sampling: rng (torch.rand / counter coins) over float target probs"
    return (
        Decision(f"correct_len_{suffix}", ("bs",), "int32", nature, "accept", site=site,
                 path=path, derives=COMMIT_DERIVES + ("draft_kv_inject", "ngram_history"),
                 doc=f"Accepted drafts; {how}. commit_lens = correct_len + 1."),
        Decision(f"bonus_{suffix}", ("bs",), "int64", nature, "accept", site=site, path=path,
                 derives=("out_tokens", "next_draft_input"),
                 doc=f"Token after the accepted prefix; {how}."),
        Decision(f"cap_trim_lens_{suffix}", ("bs",), "int32", nature, "accept", site=site,
                 path=path, derives=("block_accept_lens", "cap_trim_lens"),
                 doc="correct_len - min(correct_len, verify_lens - 1), broadcast with it."),
    )


def _decisions() -> tuple[Decision, ...]:
    return (
        _TOKEN,
        Decision("draft_tokens", ("bs", "num_steps"), "int64", "float", "draft",
                 site="dspark_draft", derives=("out_tokens", "verify_candidates"),
                 doc="Markov head steps (prev_tokens) on seeded counter noise + float logits."),
        Decision("verify_budget", (), "int32", "float", "plan_verify",
                 site="dspark_plan_verify", derives=("verify_graph_tier",),
                 doc="HostConfidenceBudgetPlanner's token budget from float confidence."),
        Decision("verify_lens", ("bs",), "int32", "float", "plan_verify", site="dspark_plan",
                 derives=("ragged_verify_layout", "positions", "cache_locations",
                          "verify_graph_tier", "cap_trim_lens"),
                 doc="Top-k by survival cumprod(confidence) under the budget; every row is "
                     "num_steps + 1 in static ragged mode (SGLang's default)."),
        Decision("greedy_mask", ("bs",), "bool", "deterministic", "accept",
                 derives=("accept_path_per_row", "accept_site"),
                 doc="top_ks <= 1 from sampling params; selects greedy vs sampled rows."),
        *_accept("greedy", "greedy", "float"),
        *_accept("sample", "sampling", "rng"),
    )


def _sites() -> tuple[Site, ...]:
    greedy = tuple(f"{n}_greedy" for n in _ACCEPT_NAMES)
    sample = tuple(f"{n}_sample" for n in _ACCEPT_NAMES)
    return (
        _TARGET_SITE,
        Site("dspark_draft", "draft", ("draft_tokens",), presets=ALL_ONLY,
             doc="DSPARK_DRAFT (17): one [bs] broadcast per step, all only."),
        Site("dspark_plan_verify", "plan_verify", ("verify_budget",), presets=ALL_ONLY,
             doc="Not an SGLang site: the budget is converged nowhere [GAP]."),
        Site("dspark_plan", "plan_verify", ("verify_lens",), presets=ALL_ONLY,
             doc="DSPARK_PLAN (7): all only; skipped in static ragged mode."),
        Site("dspark_accept_greedy", "accept", greedy, presets=ALL_ONLY, accept="count_bonus",
             doc="DSPARK_ACCEPT_GREEDY (8): all only; used when the batch is all greedy."),
        Site("dspark_accept_sample", "accept", sample, presets=RNG_PRESETS, accept="count_bonus",
             doc="DSPARK_ACCEPT_SAMPLE (9): all and rng; any sampled row in the batch."),
    )


_MEM_DECISION, _MEM_SITE = free_memory("dspark", "draft tp (or tp)")
_ACCEPT_PHASE = ("greedy_mask",) + tuple(
    f"{n}_{s}" for s in ("greedy", "sample") for n in _ACCEPT_NAMES)

DSPARK = Method(
    name="dspark",
    prefill=(
        target_prefill_phase(),
        Phase("draft_extend", compute="draft_extend", tokens_per_request="1", forwards="1",
              stage="last"),  # prompt's target hidden -> draft KV
    ),
    decode=(
        Phase("plan_window"),  # alloc_verify_window: positions_2d, verify cache locs, anchor
        Phase("draft", ("draft_tokens",), compute="draft_forward",
              tokens_per_request="num_draft_tokens", forwards="1", stage="last"),
        Phase("plan_verify", ("verify_budget", "verify_lens")),
        Phase("target_verify", compute="target_verify",
              tokens_per_request="num_draft_tokens", forwards="1", stage="all"),
        Phase("accept", _ACCEPT_PHASE),
        Phase("commit"),  # FinalizeAcceptLens, BuildOutTokens, engram history, mamba commit
        Phase("draft_extend", compute="draft_extend", tokens_per_request="num_draft_tokens",
              forwards="1", stage="last"),  # commit_hidden: min(commit_lens, verify_lens) rows
    ),
    decisions=(*_decisions(), _MEM_DECISION),
    sites=(*_sites(), _MEM_SITE),
    needs_taps=True, tree=False, drafter="head", round="block", title="DSpark",
    doc="DSpark block drafting with a Markov head and a confidence-planned ragged verify.",
)
