"""Construction helpers every method file shares: preset rules, the first token, free memory.

The helpers build records only; each method file still states its own phases and decisions.
"""

from __future__ import annotations

from .base import Decision, Nature, Phase, Site

# SGLANG_SPEC_TP_SYNC presets besides "all" (reference/decisions.md §0.1): "init" holds the
# free-memory probes; "rng" = init | the sites whose values draw random numbers.
INIT_PRESETS = frozenset({"init", "rng"})
RNG_PRESETS = frozenset({"rng"})
ALL_ONLY: frozenset[str] = frozenset()

# What every rank rebuilds from an agreed accept result (the words DESIGN.md uses).
COMMIT_DERIVES = ("commit_lens", "new_seq_lens", "out_tokens", "positions", "cache_locations")


def presets_for(nature: Nature, *, startup: bool = False) -> frozenset[str]:
    """Presets of a site SGLang does not have, chosen by the nature of its decisions.

    Host start-up probes join "init" (and so "rng"), as SGLang's MEM sites do; rng values and
    per-round host state (an n-gram corpus) join "rng", the preset that keeps every site whose
    values are not a pure function of logits; float sites are converged only under "all".
    """
    if nature == "host" and startup:
        return INIT_PRESETS
    if nature in ("rng", "host"):
        return RNG_PRESETS
    return ALL_ONLY


def target_prefill_phase(decision: str = "next_token_ids") -> Phase:
    """The target prefill; its last row samples the round's first token.

    tokens_per_request counts the sampling row only: prompt lengths are the scheduler's,
    as SGLang's DP coordination counts prefill ranks as `n` (decisions.md §0.4).
    """
    return Phase("target", (decision,), compute="target_prefill",
                 tokens_per_request="1", forwards="1", stage="all")


def first_token(method: str, *, site: str | None = None, doc: str = "") -> tuple[Decision, Site]:
    """The prefill's sampled token: rng on the sampling path, float (argmax) when greedy."""
    site_name = site or f"{method}_target"
    decision = Decision(
        "next_token_ids", ("bs",), "int64", "rng", "target", site=site_name,
        derives=("bonus_tokens", "new_seq_lens", "positions", "cache_locations"),
        doc="First sampled token of each request; the greedy path is float (argmax over "
            "logits), the sampling path rng. Stage 0 embeds it next round.")
    # DSPARK_TARGET / DFLASH_TARGET sit in "rng", which is also where the nature rule puts
    # the EAGLE family's and ngram's unconverged first token.
    return decision, Site(site_name, "target", ("next_token_ids",), presets=RNG_PRESETS, doc=doc)


def free_memory(method: str, group: str) -> tuple[Decision, Site]:
    """The start-up free-memory probe whose MIN gates draft CUDA-graph capture (DSpark, DFlash)."""
    site_name = f"{method}_mem"
    decision = Decision(
        "free_mem_gb", (), "float32", "host", "startup", site=site_name,
        readers="last_stage", derives=("draft_cuda_graph_capture",),
        doc="Free device memory in GiB; ranks that capture the draft graph on different "
            "local readings run different graphs, so the group takes the MIN.")
    site = Site(site_name, "startup", ("free_mem_gb",), presets=INIT_PRESETS, kind="min",
                startup=True,
                doc=f"{method.upper()}_MEM: MIN of free memory over the {group} cpu group "
                    "(not a broadcast), once at start-up.")
    return decision, site
