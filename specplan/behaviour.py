"""What a round does: specplan's own choices, or a model of the engine's defaults.

`behaviour: specplan` plans what specplan itself would run. `behaviour: engine` models
what the named engine does by default for the method (SGLang 0.5.23, vLLM 0.33.0 model
runner V2; reference/decisions.md), so `specplan check` reports that engine's risks. Knobs
the user writes in the YAML (sync.policy, sync.group, pipeline.*) override single choices
either way. This module is the one place engine behaviour is selected.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

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
    policy_modelled: bool = False  # a written sync.policy is the engine's own knob (SGLang presets)


def resolve(spec: Spec, method: Method) -> Choices:
    base = _specplan(spec) if spec.behaviour == "specplan" else _ENGINES[spec.engine](spec, method)
    return _apply_knobs(spec, base)


def _specplan(spec: Spec) -> Choices:
    greedy = "greedy decoding draws no random numbers" if spec.speculative.sampling == "greedy" else None
    return Choices("specplan", None, "replica", "broadcast", True, "pinned", "global", "global",
                   "chain", "dummy", greedy)


# SpecTpSync methods: which SGLANG_SPEC_TP_SYNC preset a written sync.policy names.
_SGLANG_PRESETS = ("all", "rng", "init", "off")
# SGLang converges these without SpecTpSync, under every preset: DFlash's greedy draft head
# all-gathers (max, id) over tp and takes the first max (decisions.md §0.4).
_HARDCODED = frozenset({"dflash_draft"})


def _sglang(spec: Spec, method: Method) -> Choices:
    """SGLang 0.5.23 defaults (reference/decisions.md §0, §7; sglang.md §7).

    DSpark and DFlash converge through SpecTpSync, whose preset is SGLANG_SPEC_TP_SYNC
    (default all; `sync.policy: all | rng | init | off` names another); only sites SGLang
    has (Site.sglang) exist there, so DSpark's host verify budget stays unconverged. The
    EAGLE family and n-gram broadcast only the accept triple, in eagle_sample: on sampling
    paths (not on CPU/XPU, which verify greedily) and on ROCm greedy; never their drafts,
    proposals or first token. DFlash syncs over the full tp group, the others over attn_tp
    under DP-attention, else tp.
    """
    device, sampling = spec.topology.device, spec.speculative.sampling
    written = "policy" in spec.sync.model_fields_set and spec.sync.policy in _SGLANG_PRESETS
    preset = spec.sync.policy if written else "all"
    spec_tp_sync = method.name in ("dspark", "dflash")
    sites = {}
    for site in method.sites:
        if spec_tp_sync:
            sites[site.name] = site.name in _HARDCODED or site.sglang and (
                preset == "all" or preset in site.presets)
        elif site.name.endswith("_accept"):
            sites[site.name] = device == "rocm" or (sampling != "greedy" and device != "cpu")
        else:
            sites[site.name] = False
    group = "tp" if method.name == "dflash" or not spec.topology.dp_attention else "attn_tp"
    greedy = None
    if sampling == "greedy":
        greedy = "greedy decoding draws no random numbers"
    elif device == "cpu" and not spec_tp_sync:
        greedy = "SGLang verifies greedily (argmax) on CPU even for sampling requests"
    how = (f"SpecTpSync preset {preset}" if spec_tp_sync else
           "eagle_sample broadcasts the accept triple on sampling paths and on ROCm greedy")
    notes = [f"SGLang 0.5.23: {how} over {group}; PP relays ring stage to stage with widths "
             "pinned to num_draft_tokens; aux hidden states are not relayed across stages."]
    if sampling == "mixed" and not spec_tp_sync and device not in ("rocm",):
        notes.append("mixed sampling: all-greedy batches take the greedy path, which SGLang does "
                     "not broadcast on this device")
    # The generic sampler draws the first token with the same seed and generator on every
    # rank (reference/sglang.md §2.1): lockstep rng, a soft gap, unlike the accept coins.
    lockstep = frozenset(s.name for s in method.sites if s.name.endswith("_target"))
    return Choices("engine", sites, group, "ring", True, "pinned", "global", "global", "dropped",
                   "dummy", greedy, lockstep, tuple(notes), policy_modelled=written)


def _vllm(spec: Spec, method: Method) -> Choices:
    # No convergence inside TP; vLLM has no free-memory gate on draft graphs (its KV-cache
    # sizing already takes the minimum over workers), so start-up MIN sites hold trivially.
    sites = {site.name: site.kind == "min" for site in method.sites}
    notes = ("vLLM 0.33.0 (model runner V2): no convergence inside TP (identical logits and "
             "counter-based RNG keyed by seed and position); the last PP rank broadcasts sampled "
             "tokens and drafts down each PP column; aux taps chain through the stage handoff.",)
    return Choices("engine", sites, "tp", "column", True, "agreed", "global", "global", "chain",
                   "dummy", "counter-based RNG keyed by (seed, position) makes draws rank-deterministic",
                   frozenset(), notes)


_ENGINES = {"sglang": _sglang, "vllm": _vllm}


def _apply_knobs(spec: Spec, c: Choices) -> Choices:
    sync_set, pipe_set = spec.sync.model_fields_set, spec.pipeline.model_fields_set
    engine_sites = c.engine_sites
    if "policy" in sync_set and not c.policy_modelled:
        engine_sites = None  # specplan's own policy replaces the engine's site choices
    pick = {k: getattr(spec.pipeline, k) for k in
            ("relay", "relay_drafts", "payload_width", "draft_layer_ids", "tap_ids", "aux_routing")
            if k in pipe_set}
    if "group" in sync_set:
        pick["group"] = spec.sync.group
    if "idle_ranks" in sync_set:
        pick["idle_ranks"] = spec.sync.idle_ranks
    return replace(c, engine_sites=engine_sites, **pick)
