"""One engine's facts about one speculative method: a row of engines/<engine>/methods.py.

methods/ holds what specplan plans (phases, decisions, sites, presets); a row holds what an
engine does with it: its name for the method, whether and how it runs under PP, DP-attention
and CP, how it converges the method's decisions (the group, the mechanism, the sites it
converges by default), what it refuses and its notes. The convention answers questions from
its rows (engines/base.py `Convention.row`, `.method`, `.method_names`, ...); nothing outside
engines/ reads a row's field by an engine's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from specplan.engines.choices import Numbering
from specplan.methods import get_method
from specplan.methods.base import Method

# How the engine runs the method under pipeline parallelism: on every stage ("yes"); only
# with a gate the launch line sets ("gated": SGLang's SGLANG_ENABLE_PP_SPEC=1); only on PD
# prefill nodes, which make no decode rounds ("prefill_only"); not at all ("no").
PP = Literal["yes", "gated", "prefill_only", "no"]
# How the engine converges the method's decisions within a replica: SGLang's SpecTpSync sites
# (a preset picks them), eagle_sample's broadcast of the accept triple, or nothing (vLLM:
# identical logits and counter-based RNG).
Sync = Literal["spec_tp_sync", "accept_broadcast", "none"]
# The group it converges over: the full tp group, or attn_tp under DP-attention (else tp).
Group = Literal["tp", "attn_tp_or_tp"]
# What DP-attention asks of it: nothing more, or attn_tp == 1 with a MoE draft (SGLang DSpark).
DpAttention = Literal["yes", "attn_tp_one_with_moe", "not_an_option"]


@dataclass(frozen=True)
class MethodRow:
    """How one engine runs one of specplan's methods (methods/<method>.py)."""

    method: str  # specplan's name: the key of methods.METHODS
    name: str | None  # the engine's name for it (None: plain decoding, nothing to name)
    pp: PP = "no"
    pp_note: str = ""
    dp_attention: DpAttention = "yes"
    # Whether DP-attention needs the DP LM head (--enable-dp-lm-head): never, always, or
    # everywhere but on NPU (SGLang's _handle_dflash / _handle_dspark).
    dp_lm_head: Literal["no", "always", "not_on_npu"] = "no"
    cp_note: str = ""
    sync: Sync = "none"
    group: Group = "tp"
    # Sites the engine converges by default: SpecTpSync sites it has (a preset narrows them),
    # the accept site eagle_sample broadcasts.
    default_sites: frozenset[str] = frozenset()
    # Sites converged under every setting, without SpecTpSync (DFlash's all-gathered drafts).
    always_sites: frozenset[str] = frozenset()
    # The shape of the method the engine runs where its decisions differ (methods' own
    # `Method.variants` key: vLLM's chain n-gram); None: the method as written.
    variant: str | None = None
    # Where the draft's layer ids start: after the target's layers, or after the last stage's.
    draft_layer_ids: Numbering = "global"
    taps_from_draft_config: bool = False  # the draft's config names the target layers it reads
    # The draft's layers are numbered after the target's (its config's num_hidden_layers):
    # what the plugin reports as the draft's layer ids.
    layer_ids_after_target: bool = False
    # Substrings of a draft's name from which the engine detects the method (vLLM
    # SpeculativeConfig.__post_init__), tried in the catalogue's order.
    detected_from: str = ""
    # Other engine names that mean the method: any name ending so (vLLM's MTPModelTypes,
    # "deepseek_mtp", ..., read back as mtp).
    name_suffix: str = ""
    # The engine's module that runs the method's rounds (SGLang's speculative workers), which
    # the plugin's hooks are written for.
    worker: str = ""
    accept_greedy: str = ""  # what the engine does at the accept on the greedy path
    accept_sampling: str = ""  # ... and on the sampling path
    variants_note: str = ""  # engine options that replace a default site
    mem_group: str = ""  # the group of the start-up free-memory MIN
    note: str = ""  # what differs from specplan's record (vLLM: chain only, ...)
    error_name: str = ""  # how the engine's own refusals write the method ("DFLASH")


class MethodRows:
    """An engine's rows, by specplan's method name, in the catalogue's order."""

    def __init__(self, rows: Iterable[MethodRow]) -> None:
        self.rows: Mapping[str, MethodRow] = {r.method: r for r in rows}

    def __getitem__(self, method: str) -> MethodRow:
        return self.rows[method]

    def get(self, method: str) -> MethodRow | None:
        return self.rows.get(method)

    def method(self, name: str) -> Method:
        """specplan's method `name` as the engine runs it (its row's variant, if any)."""
        m, row = get_method(name), self.rows.get(name)
        return m.variants[row.variant] if row is not None and row.variant else m

    def names(self) -> dict[str, str]:
        """specplan's method -> the engine's name, for every method the engine names."""
        return {m: r.name for m, r in self.rows.items() if r.name is not None}

    def named(self, engine_name: object, aliases: bool = True) -> str | None:
        """specplan's method for the engine's name `engine_name` (or, with `aliases`, a name
        ending in a row's `name_suffix`), or None."""
        for m, row in self.rows.items():
            if row.name is not None and row.name == engine_name:
                return m
        return next((m for m, row in self.rows.items() if aliases and row.name_suffix and
                     isinstance(engine_name, str) and engine_name.endswith(row.name_suffix)), None)
