"""The behaviour a spec resolves to: specplan's own choices, or an engine's profile
(`behaviour: engine`, each convention's `behaviour`); schema/behaviour.py applies the YAML knobs.

Its own module, below base.py and gates.py, because a gate's agreement reads it
(engines/gates.py `GateRow.agreed`) and base.py imports the gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# How last-stage decisions reach earlier stages (schema/model.py Relay, plan.json's relay mode).
RelayMode = Literal["broadcast", "column", "ring"]


@dataclass(frozen=True, kw_only=True)  # eleven fields and more: every call names them
class Choices:
    behaviour: Literal["specplan", "engine"]
    engine_sites: dict[str, bool] | None  # per-site convergence of the engine model, or None
    group: Literal["replica", "attn_tp", "tp"]
    relay: RelayMode
    relay_drafts: bool
    payload_width: str  # pinned | agreed | dynamic
    draft_layer_ids: Literal["global", "stage_local"]
    tap_ids: str  # global | stage_local
    aux_routing: str  # chain | direct | dropped
    idle_ranks: str  # dummy | skip
    rng_is_float: str | None  # why rng decisions are rank-deterministic here, if they are
    lockstep_sites: frozenset[str] = frozenset()  # sites whose draws share one seed on every rank
    notes: tuple[str, ...] = field(default=())
    policy_modelled: bool = False  # a written sync.policy is the engine's own knob (SGLang presets)

