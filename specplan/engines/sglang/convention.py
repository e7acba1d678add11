"""SGLang (every supported release): world = tp * pp, rank = tp * pp_rank + tp_rank (tp fastest).

The TP block is read three ways, independently: as attn_dp x attn_cp x attn_tp (attn_tp
fastest; attn_dp = dp only with DP-attention), as moe_dp x moe_ep x moe_tp (moe_tp fastest)
and as contiguous chunks of dcp ranks. dp > 1 without DP-attention starts `dp` independent
worlds. A family as wide as the TP group reuses its communicators (alias tp), except moe_ep
on NPU; when attn_cp is wider than moe_dp, moe_dp reuses the attn_cp groups (CP partners
share tokens before MoE): SGLang's initialize_model_parallel.

Worked example, 8 ranks: tp=8, dp=2, dp_attention, ep=8 (attn_tp=4, moe_tp=1):
    attn_tp  [0,1,2,3] [4,5,6,7]       replicas [0..3] (source 0), [4..7] (source 4)
    moe_ep   [0..7]  (the tp group itself: ep == tp)
    attn_cp, moe_dp, moe_tp, pp, dcp: singletons
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

from specplan.engines.releases import at_least, title
from specplan.engines.sglang import CP_COUNTS_ATTN_DP_FROM, NAME, PP_SPEC_FROM
from specplan.engines.gates import GateUse, resolve_gates
from specplan.engines.sglang.gates import GATES
from specplan.engines.sglang.handoff import AXES, CONNECTORS, DEFAULT_CONNECTOR, SGLangRules
from specplan.engines.sglang.launch import LAUNCH
from specplan.engines.sglang.methods import ROWS
from specplan.engines.sglang.spec_tp_sync import SITE_SLUGS
from specplan.engines.base import (Choices, Convention, DpAgreement, LayerCollective, MoeLayout,
                                   MoeRows, Spec, Topology, Violation)
from specplan.mesh.axes import AxisLayout
from specplan.mesh.family import Family
from specplan.methods import get_method
from specplan.methods.base import Method

T = title(NAME)  # the newest release, which the messages below cite
COUNT_INTS = 7  # per rank: tokens, forward mode, cuda-graph ok, extend-in-batch, ...
# SpecTpSync methods: which SGLANG_SPEC_TP_SYNC preset a written sync.policy names.
PRESETS = ("all", "rng", "init", "off")


class SGLang(Convention):
    name = NAME
    remainder_stages = "last stages"
    # Only the last stage drafts and accepts; SGLang's scheduler relays the results stage to
    # stage in its own output messages (scheduler_pp_mixin), which the plugin's relay rides.
    pipeline_relay = "ring"
    methods = ROWS
    launch = LAUNCH
    page_size = 1  # --page-size
    kv_axes, connectors, default_connector = AXES, CONNECTORS, DEFAULT_CONNECTOR
    switchable_sites = SITE_SLUGS  # SGLANG_SPEC_TP_SYNC

    def world_size(self, t: Topology) -> int:
        return t.tp * t.pp

    def num_worlds(self, t: Topology) -> int:
        return 1 if t.dp_attention else t.dp

    def widths(self, t: Topology) -> dict[str, int]:
        return {"tp": t.tp, "pp": t.pp, "dp": t.dp, "cp": t.cp, "dcp": t.dcp, "ep": t.ep,
                "moe_dp": t.moe_dp}

    def derived(self, t: Topology) -> dict[str, int]:
        attn_dp = t.dp if t.dp_attention else 1
        return {"attn_dp": attn_dp, "attn_cp": t.cp, "attn_tp": t.tp // attn_dp // t.cp,
                "moe_ep": t.ep, "moe_dp": t.moe_dp, "moe_tp": t.tp // t.ep // t.moe_dp}

    def families(self, t: Topology, is_moe: bool, eplb: bool = False) -> tuple[Family, ...]:
        d, tp = self.derived(t), t.tp
        world = AxisLayout(("pp", t.pp), ("tp", tp))
        attn = _attention(t, d)
        moe = AxisLayout(("pp", t.pp), ("moe_dp", d["moe_dp"]), ("moe_ep", d["moe_ep"]),
                         ("moe_tp", d["moe_tp"]))
        chunks = AxisLayout(("pp", t.pp), ("chunk", tp // t.dcp), ("dcp", t.dcp))
        tp_fam = world.family("tp", group=("tp",))
        attn_cp = attn.family("attn_cp", group=("attn_cp",), alias=_tp_alias(d["attn_cp"], tp))
        if attn_cp.group_size > d["moe_dp"]:
            moe_dp = replace(attn_cp, name="moe_dp", alias="attn_cp")
        elif d["moe_dp"] == tp:
            moe_dp = replace(tp_fam, name="moe_dp", alias="tp")
        else:
            moe_dp = moe.family("moe_dp", group=("moe_dp",), over=("pp", ("moe_ep", "moe_tp")))
        # SGLang builds the dcp groups right after tp, and only when dcp > 1 (else none: the
        # one-rank family stays last, where no engine group answers to it)
        dcp = chunks.family("dcp", group=("dcp",))
        return (
            tp_fam,
            *((dcp,) if t.dcp > 1 else ()),
            attn_cp,
            attn.family("attn_tp", group=("attn_tp",), over=("pp", ("attn_dp", "attn_cp")),
                        alias=_tp_alias(d["attn_tp"], tp)),
            moe_dp,
            moe.family("moe_ep", group=("moe_ep",),
                       alias=_tp_alias(d["moe_ep"], tp) if t.device != "npu" else None),
            moe.family("moe_tp", group=("moe_tp",), over=("pp", ("moe_dp", "moe_ep")),
                       alias=_tp_alias(d["moe_tp"], tp)),
            world.family("pp", group=("pp",)),
            *(() if t.dcp > 1 else (dcp,)),
            self.replica(t),
        )

    def replica(self, t: Topology) -> Family:
        """One attn_dp index on every PP stage (DP-attention), else the whole world."""
        return _attention(t, self.derived(t)).family(
            "replica", group=("pp", ("attn_cp", "attn_tp")), over=("attn_dp",))

    def extra_coords(self, t: Topology) -> dict[str, list[int]]:
        # attn_dp has no family of its own: it is the replica's index inside the TP block
        return {"attn_dp": _attention(t, self.derived(t)).coords("attn_dp")}

    def split_layers(self, num_layers: int, pp: int) -> list[int]:
        """Remainder layers go to the last stages. 61 on 4: [15, 15, 15, 16]."""
        parts = [num_layers // pp] * pp
        for i in range(1, num_layers % pp + 1):
            parts[-i] += 1
        return parts

    def attention_tp(self, t: Topology) -> int:
        return self.derived(t)["attn_tp"]

    def num_replicas(self, t: Topology) -> int:
        return t.dp if t.dp_attention else 1

    def sync_family(self, group: str) -> str:
        return group

    def dp_agreement(self, spec: Spec) -> DpAgreement | None:
        """DP-attention: the MLP / MoE runs over the whole TP block, so every round starts
        with an all-gather of each rank's count vector over tp (attn-TP rank 0 of each
        replica authoritative)."""
        t = spec.topology
        if not (t.dp_attention and t.dp > 1):
            return None
        return DpAgreement("tp", t.tp, "all_gather", COUNT_INTS)

    def moe_layout(self, spec: Spec) -> MoeLayout:
        """Under DP-attention with attn_tp > 1 and an all-to-all backend each attention-TP
        rank dispatches 1/attn_tp of the rows (reference/sglang.md §5.3); DeepEP dispatches
        over the full TP group."""
        t, moe = spec.topology, spec.model.moe
        a2a = moe is not None and moe.a2a != "none"
        split = t.dp_attention and self.attention_tp(t) > 1 and a2a
        deepep = moe is not None and moe.a2a == "deepep"
        return MoeLayout("tp" if deepep else "moe_ep", split)

    def moe_layer_collectives(self, derived: Mapping[str, int], widths: Mapping[str, int],
                              moe: MoeRows) -> tuple[LayerCollective, ...]:
        """MoeTransport (models/deepseek_common/moe_transport.py): attention-CP partners gather
        and reduce-scatter their rows over attn_cp; under DP-attention a tensor-parallel MoE
        gathers every DP rank's rows over tp, then hands each its rows back: a reduce-scatter
        over tp when each DP shard is one rank and moe_ep = attn_dp (reduce_scatterv), else the
        MoE's all-reduce over tp and a local copy (dp_scatter). An all-to-all backend dispatches
        and combines, after each attention-TP rank took 1/attn_tp of the rows (regathered over
        attn_tp) when the plan splits them."""
        d, a2a = derived, moe.a2a != "none"
        if d["attn_cp"] > 1 and not a2a:
            return (LayerCollective("all_gather", "attn_cp", "cp_gather"),
                    LayerCollective("reduce_scatter", "attn_cp", "cp_scatter"))
        if a2a:
            out = (LayerCollective("all_to_all", moe.dispatch_family, "moe_dispatch"),
                   LayerCollective("all_to_all", moe.dispatch_family, "moe_combine"))
            # the plan names the gather's family exactly when it splits the rows
            gather = moe.gather_family if moe.row_split and d["attn_cp"] == 1 else None
            return out + ((LayerCollective("all_gather", gather, "moe_row_gather"),)
                          if gather is not None else ())
        if d["attn_dp"] > 1:
            scatterv = d["attn_tp"] == 1 and d["moe_ep"] == d["attn_dp"]
            return (LayerCollective("all_gather", "tp", "dp_gather"),
                    LayerCollective("reduce_scatter" if scatterv else "all_reduce", "tp", "dp_scatter"))
        return ()

    def behaviour(self, spec: Spec, method: Method) -> Choices:
        return _behaviour(spec, method, self.title)

    def violations(self, spec: Spec) -> list[Violation]:
        t = spec.topology
        out = [*_attention_rules(t, self.title, at_least(NAME, self.version, CP_COUNTS_ATTN_DP_FROM)), *_moe_rules(spec, self.title), *_tap_rules(spec)]
        if t.tp % t.dcp:
            out.append(Violation(("topology", "dcp"), f"dcp={t.dcp} does not divide tp={t.tp}: "
                                 "DCP groups are contiguous chunks of dcp ranks of each TP group "
                                 f"({self.title} initialize_model_parallel)"))
        if t.dp > 1 and not t.dp_attention and t.nodes != 1:
            out.append(Violation(("topology", "nodes"), f"dp={t.dp} without dp_attention runs on "
                                 f"one node, found nodes={t.nodes}: multi-node data-parallel "
                                 f"replicas are not supported, use dp_attention ({self.title} "
                                 "check_server_args)"))
            return out
        return out + self.node_violations(spec, self.world_size(t), "check_server_args")

    def world_warning(self, world_size: int, num_worlds: int) -> str | None:
        if num_worlds == 1:
            return None
        return (f"dp={num_worlds} without dp_attention starts {num_worlds} independent worlds of "
                f"tp*pp = {world_size} ranks: {num_worlds * world_size} GPUs on one node ({self.title} "
                "check_server_args refuses data-parallel replicas across nodes; the "
                "DataParallelController launches one scheduler world per replica)")

    def gates(self, spec: Spec, choices: Choices) -> tuple[GateUse, ...]:
        return resolve_gates(GATES, spec, choices)

    def max_draft_tokens(self, topk: int, num_steps: int) -> tuple[int, str]:
        # speculative/eagle_utils.py organize_draft_results (the same in 0.5.20 - 0.5.23)
        # takes torch.topk of num_draft_token - 1 over the draft loop's scores: topk from the
        # first step (spec_utils._select_top_k_tokens_first, [b, 1, topk]) and topk * topk
        # from each later one (_select_top_k_tokens_later, [b, topk, topk]); past them
        # torch.topk raises. Checked on the wheel: tests/engines/test_draft_tree_bound.py.
        return 1 + topk + (num_steps - 1) * topk * topk, "1 + topk + (num_steps-1)*topk^2"

    def launch_refusal(self, spec: Spec) -> str | None:
        if not self.pp_spec:
            return _pp_spec_refusal(spec, self.title)
        return _launch_refusal(spec, self.attention_tp(spec.topology))

    @property
    def pp_spec(self) -> bool:
        """Whether this release runs speculative decoding under PP (and has SGLANG_ENABLE_PP_SPEC)."""
        return at_least(NAME, self.version, PP_SPEC_FROM)

    def handoff(self, connector: str) -> SGLangRules:
        return SGLangRules(connector)  # every transfer backend maps ranks alike


def _tap_rules(spec: Spec) -> list[Violation]:
    """SGLang captures a tap only inside the layer loop (models/llama.py LlamaModel.forward:
    `for i in range(self.start_layer, self.end_layer)`, capturing when i is in
    layers_to_capture), so tap num_layers, the residual after the last layer, is never made."""
    layers = spec.model.num_layers
    taps = spec.speculative.taps(layers)
    if layers not in taps:
        return []
    at = ("speculative", "aux_layers", list(spec.speculative.aux_layers or ()).index(layers)) \
        if spec.speculative.aux_layers and layers in spec.speculative.aux_layers else ("speculative",)
    return [Violation(at, f"tap {layers} (= num_layers, the residual after the last layer) is "
                          f"never captured: {T} captures taps inside the layer loop only "
                          "(models/llama.py LlamaModel.forward, i in layers_to_capture for i in "
                          f"range(start_layer, end_layer)); expected taps 0 .. {layers - 1}")]


def _attention(t: Topology, d: dict[str, int]) -> AxisLayout:
    return AxisLayout(("pp", t.pp), ("attn_dp", d["attn_dp"]), ("attn_cp", d["attn_cp"]),
                      ("attn_tp", d["attn_tp"]))


def _tp_alias(width: int, tp: int) -> str | None:
    """A family as wide as tp reuses the tp communicator, at tp 1 too (initialize_model_parallel:
    `if attn_tp_size == tensor_model_parallel_size: _ATTN_TP = _TP`, and so for each)."""
    return "tp" if width == tp else None


def _pp_spec_refusal(spec: Spec, T: str) -> str | None:
    """Releases before PP_SPEC_FROM: no speculative algorithm under PP off NPU; on NPU EAGLE
    (single-layer) on a PD prefill node only (arg_groups/validation_hook.py check_server_args)."""
    t, s = spec.topology, spec.speculative
    if t.pp == 1 or s.method == "none":
        return None
    if t.device != "npu":
        return (f"{T} runs no speculative decoding under pipeline parallel (pp={t.pp}) on "
                f"{t.device}: check_server_args asserts speculative_algorithm is None when "
                "pp_size > 1 (arg_groups/validation_hook.py; EAGLE under PP from "
                f"{PP_SPEC_FROM})")
    prefill = spec.disaggregation is not None and spec.disaggregation.role == "prefill"
    if ROWS[s.method].pp == "gated" and prefill:  # EAGLE / NEXTN
        return None
    return (f"{T} runs speculative decoding under pipeline parallel on NPU only with EAGLE "
            "(single-layer) on PD prefill nodes (--disaggregation-mode prefill), not "
            f"{s.method}{'' if prefill else ' here'} (arg_groups/validation_hook.py check_server_args)")


def _attention_rules(t: Topology, T: str = T, attn_dp_only: bool = True) -> list[Violation]:
    """attn_dp_only: the release counts DP-attention's replicas in the CP rule (0.5.22 on);
    older releases count every DP replica (dp_size), with or without DP-attention."""
    if t.dp_lm_head and not (t.dp_attention and t.dp > 1):
        return [Violation(("topology", "dp_lm_head"), "dp_lm_head needs DP-attention (dp > 1 with "
                          f"dp_attention): --enable-dp-lm-head requires attention DP ({T} "
                          "arg_groups/overrides.py _dp_lm_head_validation)")]
    if t.dp_attention and t.tp % t.dp:
        return [Violation(("topology", "dp"), f"tp={t.tp} is not divisible by dp={t.dp} with "
                          f"dp_attention ({T} handle_data_parallelism: tp % attn_dp_size)")]
    attn_dp = t.dp if t.dp_attention else 1
    if t.tp % (attn_dp * t.cp):
        how = f"dp={t.dp} * cp={t.cp}" if t.dp_attention else f"cp={t.cp}"
        return [Violation(("topology", "cp"), f"tp={t.tp} is not divisible by {how} ({T} "
                          "handle_context_parallelism: tp % (attn_dp_size * attn_cp_size))")]
    if not attn_dp_only and t.cp > 1 and t.tp % (t.dp * t.cp):
        return [Violation(("topology", "cp"), f"tp={t.tp} is not divisible by dp={t.dp} * "
                          f"cp={t.cp}: {T} counts every DP replica here, with or without "
                          "DP-attention (arg_groups/parallel_hook.py handle_context_parallelism: "
                          f"tp_size % (dp_size * attn_cp_size); attn_dp_size from "
                          f"{CP_COUNTS_ATTN_DP_FROM})")]
    return []


def _moe_rules(spec: Spec, T: str = T) -> list[Violation]:
    t, moe = spec.topology, spec.model.moe
    at = ("topology", "moe_dp")
    out = []
    if t.tp % (t.ep * t.moe_dp):
        out.append(Violation(("topology", "ep"), f"tp={t.tp} is not divisible by ep={t.ep} * "
                             f"moe_dp={t.moe_dp} ({T} derive_parallel_widths: moe_tp = tp / ep / moe_dp)"))
    elif t.moe_dp > 1 and t.ep > 1 and t.ep * t.moe_dp != t.tp:
        out.append(Violation(at, f"ep={t.ep} * moe_dp={t.moe_dp} must equal tp={t.tp} when both "
                             f"are above 1 ({T} handle_context_parallelism)"))
    if t.moe_dp > 1 and t.pp > 1:
        out.append(Violation(at, f"moe_dp={t.moe_dp} needs pp=1, found pp={t.pp} ({T} "
                             "handle_context_parallelism)"))
    if t.moe_dp > 1 and t.moe_dp != t.cp:
        out.append(Violation(at, f"moe_dp={t.moe_dp} must equal cp={t.cp}: attn_cp_size != "
                             f"moe_dp_size is only supported with moe_dp 1 ({T} handle_context_parallelism)"))
    if (t.ep > 1 or t.moe_dp > 1) and moe is None:
        out.append(Violation(("topology", "ep" if t.ep > 1 else "moe_dp"), f"ep={t.ep}, "
                             f"moe_dp={t.moe_dp} need a mixture-of-experts model (model.moe)"))
    if moe is not None and moe.num_experts % t.ep:
        out.append(Violation(("model", "moe", "num_experts"), f"num_experts={moe.num_experts} is "
                             f"not divisible by ep={t.ep}: every EP rank holds the same number of "
                             f"experts ({T} ExpertLocationMetadata._init_common)"))
    return out


def _launch_refusal(spec: Spec, attn_tp: int) -> str | None:
    t, s = spec.topology, spec.speculative
    row, title = ROWS[s.method], get_method(s.method).title
    prefill = spec.disaggregation is not None and spec.disaggregation.role == "prefill"
    if t.pp > 1 and row.pp == "prefill_only" and not prefill:
        return (f"SGLang runs {title} under pipeline parallel only on PD prefill nodes "
                "(--disaggregation-mode prefill), which make no decode rounds "
                "(arg_groups/validation_hook.py check_pipeline_parallel_compat)")
    if t.pp > 1 and row.pp == "no":
        return (f"SGLang runs speculative decoding under pipeline parallel (pp={t.pp}) only "
                f"with EAGLE or NEXTN (single-layer), not {s.method} "
                "(arg_groups/validation_hook.py check_pipeline_parallel_compat)")
    if t.pp > 1 and row.pp == "gated" and spec.disaggregation is not None and not prefill:
        return (f"SGLang runs {title} under pipeline parallel on a PD decode instance neither "
                "with SGLANG_ENABLE_PP_SPEC=1 (\"not compatible with --disaggregation-mode\") "
                "nor without it (\"only supported on prefill nodes\") "
                "(arg_groups/validation_hook.py check_pipeline_parallel_compat)")
    if t.pp > 1 and row.pp == "gated" and t.dp_attention:
        return ("SGLang runs EAGLE/NEXTN decode rounds under pipeline parallel only with "
                "SGLANG_ENABLE_PP_SPEC=1, which is not compatible with DP-attention "
                "(--attn-dp-size)")
    moe_draft = row.dp_attention == "attn_tp_one_with_moe" and spec.model.moe
    if moe_draft and t.dp_attention and attn_tp > 1:
        return (f"SGLang's {title} worker requires attn_tp == 1 under DP-attention with a MoE "
                f"(DeepSeek-V4) draft; here attn_tp = tp {t.tp} / dp {t.dp} / cp {t.cp} = "
                f"{attn_tp} (set dp == tp; seed 000 section 2, dspark_worker_v2.py)")
    needs_lm_head = row.dp_lm_head != "no" and t.dp_attention and t.dp > 1 and \
        (row.dp_lm_head == "always" or t.device != "npu")
    if needs_lm_head and not t.dp_lm_head:
        return (f"SGLang refuses {row.error_name} with DP-attention without --enable-dp-lm-head "
                "(topology.dp_lm_head: true): the draft borrows the target's DP LM head "
                f"(arg_groups/speculative_hook.py _handle_{s.method})")
    return None


def accept_broadcast(device: str, sampling: str) -> bool:
    """Whether eagle_sample broadcasts the accept triple: on sampling paths (not on CPU/XPU,
    which verify greedily) and on ROCm greedy."""
    return device == "rocm" or (sampling != "greedy" and device != "cpu")


def _behaviour(spec: Spec, method: Method, T: str = T) -> Choices:
    """SGLang defaults (reference/decisions.md §0, §7; sglang.md §7).

    DSpark and DFlash converge through SpecTpSync, whose preset is SGLANG_SPEC_TP_SYNC
    (default all; `sync.policy: all | rng | init | off` names another); only sites SGLang
    has (its row's default_sites) exist there, so DSpark's host verify budget stays unconverged. The
    EAGLE family and n-gram broadcast only the accept triple, in eagle_sample: on sampling
    paths (not on CPU/XPU, which verify greedily) and on ROCm greedy; never their drafts,
    proposals or first token. Every method syncs over attn_tp under DP-attention, else tp
    (get_dp_tp_group(); DFlash's worker too, dflash_worker_v2.py DFlashWorkerV2.__init__).
    """
    device, sampling = spec.topology.device, spec.speculative.sampling
    written = "policy" in spec.sync.model_fields_set and spec.sync.policy in PRESETS
    preset = spec.sync.policy if written else "all"
    row = ROWS[method.name]
    spec_tp_sync = row.sync == "spec_tp_sync"
    sites = {}
    for site in method.sites:
        on = site.name in row.default_sites
        if spec_tp_sync:
            sites[site.name] = site.name in row.always_sites or on and (
                preset == "all" or preset in site.presets)
        else:
            sites[site.name] = on and accept_broadcast(device, sampling)
    # SpecTpSync is built on get_dp_tp_group() for DSpark and DFlash alike (dflash_worker_v2.py
    # DFlashWorkerV2.__init__: "spec broadcasts must stay within the attn-TP group").
    group: Literal["attn_tp", "tp"] = ("attn_tp" if row.group == "attn_tp_or_tp"
                                      and spec.topology.dp_attention else "tp")
    greedy = None
    if sampling == "greedy":
        greedy = "greedy decoding draws no random numbers"
    elif device == "cpu" and not spec_tp_sync:
        greedy = "SGLang verifies greedily (argmax) on CPU even for sampling requests"
    how = (f"SpecTpSync preset {preset}" if spec_tp_sync else
           "eagle_sample broadcasts the accept triple on sampling paths and on ROCm greedy")
    notes = [f"{T}: {how} over {group}; PP relays ring stage to stage with widths "
             "pinned to num_draft_tokens; aux hidden states are not relayed across stages."]
    if sampling == "mixed" and not spec_tp_sync and device not in ("rocm",):
        notes.append("mixed sampling: all-greedy batches take the greedy path, which SGLang does "
                     "not broadcast on this device")
    # The generic sampler draws the first token with the same seed and generator on every
    # rank (reference/sglang.md §2.1): lockstep rng, a soft gap, unlike the accept coins.
    lockstep = frozenset(s.name for s in method.sites if s.name.endswith("_target"))
    return Choices(behaviour="engine", engine_sites=sites, group=group, relay="ring", relay_drafts=True,
                   payload_width="pinned", draft_layer_ids="global", tap_ids="global",
                   aux_routing="dropped", idle_ranks="dummy", rng_is_float=greedy,
                   lockstep_sites=lockstep, notes=tuple(notes), policy_modelled=written)
