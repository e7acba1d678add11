"""What a round does: specplan's own choices, or a model of the engine's defaults.

`behaviour: specplan` plans what specplan itself would run. `behaviour: engine` models
what the named engine does by default for the method (SGLang 0.5.23, vLLM 0.33.0 model
runner V2; reference/decisions.md), so `specplan check` reports that engine's risks. Knobs
the user writes in the YAML (sync.policy, sync.group, pipeline.*) override single choices
either way. The engine profiles themselves live with each engine's conventions
(specplan/engines/, Convention.behaviour, which builds the `Choices` type engines/base.py
declares); this module owns specplan's own choices and the knobs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specplan.engines import Choices, convention
from specplan.engines.base import RelayMode
from specplan.methods.base import Method
from specplan.schema import Spec


def resolve(spec: Spec, method: Method) -> Choices:
    engine = convention(spec.engine, spec.engine_version)
    if spec.behaviour == "specplan":
        relay = engine.pipeline_relay if spec.topology.pp > 1 else "broadcast"  # pp 1: none runs
        return _apply_knobs(spec, _specplan(spec, relay))
    return _apply_knobs(spec, engine.behaviour(spec, method))


def _specplan(spec: Spec, relay: RelayMode) -> Choices:
    """specplan's own plan; `relay` is the one the engine's plugin can run under PP."""
    greedy = "greedy decoding draws no random numbers" if spec.speculative.sampling == "greedy" else None
    return Choices(behaviour="specplan", engine_sites=None, group="replica", relay=relay,
                   relay_drafts=True, payload_width="pinned", draft_layer_ids="global",
                   tap_ids="global", aux_routing="chain", idle_ranks="dummy", rng_is_float=greedy)


def _apply_knobs(spec: Spec, c: Choices) -> Choices:
    sync_set, pipe_set = spec.sync.model_fields_set, spec.pipeline.model_fields_set
    engine_sites = c.engine_sites
    if "policy" in sync_set and not c.policy_modelled:
        engine_sites = None  # specplan's own policy replaces the engine's site choices
    # each key a Choices field of the same name and type
    pick: dict[str, Any] = {k: getattr(spec.pipeline, k) for k in
            ("relay", "relay_drafts", "payload_width", "draft_layer_ids", "tap_ids", "aux_routing")
            if k in pipe_set}
    if "group" in sync_set:
        pick["group"] = spec.sync.group
    if "idle_ranks" in sync_set:
        pick["idle_ranks"] = spec.sync.idle_ranks
    return replace(c, engine_sites=engine_sites, **pick)
