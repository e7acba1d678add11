"""What a round does: specplan's own choices, or a model of the engine's defaults.

`behaviour: specplan` plans what specplan itself would run. `behaviour: engine` models
what the named engine does by default for the method (SGLang 0.5.23, vLLM 0.33.0 model
runner V2; reference/decisions.md), so `specplan check` reports that engine's risks. Knobs
the user writes in the YAML (sync.policy, sync.group, pipeline.*) override single choices
either way. This module is the one place engine behaviour is selected.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specplan.methods.base import Method
from specplan.schema import Spec


@dataclass(frozen=True)
class Choices:
    behaviour: str
    engine_sites: dict[str, bool] | None  # per-site convergence of the engine model, or None
    group: str  # replica | attn_tp | tp
    relay: str  # broadcast | column | ring
    relay_drafts: bool
    payload_width: str  # pinned | agreed | dynamic
    draft_layer_ids: str  # global | stage_local
    tap_ids: str  # global | stage_local
    aux_routing: str  # chain | direct | dropped
    idle_ranks: str  # dummy | skip
    rng_is_float: str | None  # why rng decisions are rank-deterministic here, if they are
    lockstep_sites: frozenset[str] = frozenset()  # sites whose draws share one seed on every rank
    notes: tuple[str, ...] = field(default=())


def resolve(spec: Spec, method: Method) -> Choices:
    base = _specplan(spec) if spec.behaviour == "specplan" else _ENGINES[spec.engine](spec, method)
    return _apply_knobs(spec, base)


def _specplan(spec: Spec) -> Choices:
    greedy = "greedy decoding draws no random numbers" if spec.speculative.sampling == "greedy" else None
    return Choices("specplan", None, "replica", "broadcast", True, "pinned", "global", "global",
                   "chain", "dummy", greedy)


def _sglang(spec: Spec, method: Method) -> Choices:
    sampling = spec.speculative.sampling != "greedy"
    sites = {}
    for site in method.sites:
        if method.name in ("dspark", "dflash"):
            on = True  # SGLANG_SPEC_TP_SYNC defaults to "all"
        elif site.name.endswith("_accept"):
            on = sampling or spec.topology.device == "rocm"  # eagle_sample's broadcasts
        else:
            on = False
        sites[site.name] = on
    group = "tp" if method.name == "dflash" or not spec.topology.dp_attention else "attn_tp"
    greedy = None if sampling else "greedy decoding draws no random numbers"
    notes = ("SGLang 0.5.23: SpecTpSync sites all on (DSpark, DFlash); EAGLE family broadcasts "
             "the accept triple on sampling paths (and on ROCm greedy) over attn_tp or tp; "
             "PP relays ring stage to stage with widths pinned to num_draft_tokens; "
             "aux hidden states are not relayed across stages.",)
    # The generic sampler draws the first token with the same seed and generator on every
    # rank (reference/sglang.md §2.1): lockstep rng, a soft gap, unlike the accept coins.
    lockstep = frozenset(s.name for s in method.sites if s.name.endswith("_target"))
    return Choices("engine", sites, group, "ring", True, "pinned", "global", "global", "dropped",
                   "dummy", greedy, lockstep, notes)


def _vllm(spec: Spec, method: Method) -> Choices:
    sites = {site.name: False for site in method.sites}
    notes = ("vLLM 0.33.0 (model runner V2): no convergence inside TP (identical logits and "
             "counter-based RNG keyed by seed and position); the last PP rank broadcasts sampled "
             "tokens and drafts down each PP column; aux taps chain through the stage handoff.",)
    return Choices("engine", sites, "tp", "column", True, "agreed", "global", "global", "chain",
                   "dummy", "counter-based RNG keyed by (seed, position) makes draws rank-deterministic",
                   frozenset(), notes)


_ENGINES = {"sglang": _sglang, "vllm": _vllm}


def _apply_knobs(spec: Spec, c: Choices) -> Choices:
    sync_set, pipe_set = spec.sync.model_fields_set, spec.pipeline.model_fields_set
    engine_sites = None if "policy" in sync_set else c.engine_sites
    pick = {k: getattr(spec.pipeline, k) for k in
            ("relay", "relay_drafts", "payload_width", "draft_layer_ids", "tap_ids", "aux_routing")
            if k in pipe_set}
    if "group" in sync_set:
        pick["group"] = spec.sync.group
    if "idle_ranks" in sync_set:
        pick["idle_ranks"] = spec.sync.idle_ranks
    from dataclasses import replace
    return replace(c, engine_sites=engine_sites, **pick)
