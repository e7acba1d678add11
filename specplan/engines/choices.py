"""The behaviour a spec resolves to: specplan's own choices, or an engine's profile
(`behaviour: engine`, each convention's `behaviour`); schema/behaviour.py applies the YAML knobs.

Its own module, below base.py and gates.py, because a gate's agreement reads it
(engines/gates.py `GateRow.agreed`) and base.py imports the gates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# The values of a behaviour's choices, spelled once: the spec's keys (schema/model.py `Sync`,
# `Behaviour`), the Choices below and plan.json (plan/model.py) name these.
RelayMode = Literal["broadcast", "column", "ring"]  # how last-stage decisions reach earlier stages
PayloadWidth = Literal["pinned", "agreed", "dynamic"]  # how wide a relay's payload is sent
Numbering = Literal["global", "stage_local"]  # layer and tap ids: the target's, or the stage's
AuxRouting = Literal["chain", "direct"]  # how taps reach the drafter
SyncGroup = Literal["replica", "attn_tp", "tp"]  # the group decisions converge over
BehaviourMode = Literal["specplan", "engine"]  # specplan's own choices, or the engine's profile


@dataclass(frozen=True, kw_only=True)  # eleven fields and more: every call names them
class Choices:
    behaviour: BehaviourMode
    engine_sites: dict[str, bool] | None  # per-site convergence of the engine model, or None
    group: SyncGroup
    relay: RelayMode
    relay_drafts: bool
    payload_width: PayloadWidth
    draft_layer_ids: Numbering
    tap_ids: Numbering
    aux_routing: str  # chain | direct | dropped
    idle_ranks: str  # dummy | skip
    rng_is_float: str | None  # why rng decisions are rank-deterministic here, if they are
    lockstep_sites: frozenset[str] = frozenset()  # sites whose draws share one seed on every rank
    notes: tuple[str, ...] = field(default=())
    policy_modelled: bool = False  # a written sync.policy is the engine's own knob (SGLang presets)

