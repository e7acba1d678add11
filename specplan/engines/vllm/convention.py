"""vLLM (every supported release): ranks = arange(world).reshape(DP, PP, PCP, TP); a family's groups come from
moving its axis last (ExternalDP is 1 here): initialize_model_parallel.

Global rank = ((dp * PP + pp) * PCP + pcp) * TP + tp. DCP groups are chunks of dcp ranks
of the TP group when pcp = 1; with pcp > 1 vLLM moves PCP next to TP before chunking, and
ParallelConfig allows dcp 1, pcp or tp * pcp only. Expert parallel, when on, spans a whole
stage: dp * pcp * tp ranks.

Worked example, 8 ranks: tp=2, pp=2, cp(pcp)=2:
    tp  [0,1] [2,3] [4,5] [6,7]        pcp [0,2] [1,3] [4,6] [5,7]
    pp  [0,4] [2,6] [1,5] [3,7]        (order: tp index, then pcp index)
    replica [0..7], source 4 (first rank of the last stage)
"""

from __future__ import annotations

from collections.abc import Mapping
from specplan.engines.releases import title
from specplan.engines.handoff import Rules
from specplan.engines.vllm import NAME
from specplan.engines.vllm.handoff import AXES, CONNECTORS, DEFAULT_CONNECTOR, RULES
from specplan.engines.vllm.launch import LAUNCH
from specplan.engines.gates import GateUse, resolve_gates
from specplan.engines.vllm.gates import GATES
from specplan.engines.vllm.methods import ROWS
from specplan.engines.base import (Choices, Convention, DpAgreement, LayerCollective, MoeLayout,
                                   MoeRows, Spec, Topology, Violation)
from specplan.mesh.axes import AxisLayout
from specplan.mesh.family import Family
from specplan.methods.base import Method, Site

T = title(NAME)  # the newest release, which the messages below cite
# EAGLE-1 drafters (llama_eagle.py EagleLlamaForCausalLM, deepseek_eagle.py
# EagleDeepseekV3ForCausalLM) start their layer ids at ModelConfig.get_num_layers(parallel_config):
# the last stage's own layer count, not the target's total (EAGLE3 uses
# get_total_num_hidden_layers). Under pp > 1 the draft layer takes a target layer's name.
# Which methods do: their rows' draft_layer_ids (vllm/methods.py).
STAGE_LOCAL_DRAFT_NOTE = (f"{T} numbers EAGLE draft layers from the last stage's own layer count "
                          "(llama_eagle.py / deepseek_eagle.py: start_layer_id = "
                          "ModelConfig.get_num_layers(parallel_config)), not after the target's "
                          "total layers.")


class VLLM(Convention):
    name = NAME
    remainder_stages = "stages before the last"
    methods = ROWS
    launch = LAUNCH
    page_size = 16  # --block-size
    kv_axes, connectors, default_connector = AXES, CONNECTORS, DEFAULT_CONNECTOR

    def world_size(self, t: Topology) -> int:
        return t.dp * t.pp * t.cp * t.tp

    def widths(self, t: Topology) -> dict[str, int]:
        return {"tp": t.tp, "pp": t.pp, "dp": t.dp, "cp": t.cp, "dcp": t.dcp, "ep": t.ep}

    def derived(self, t: Topology) -> dict[str, int]:
        return {"pcp": t.cp}

    def families(self, t: Topology, is_moe: bool, eplb: bool = False) -> tuple[Family, ...]:
        """initialize_model_parallel's order; with --enable-eplb an `eplb` group of the EP
        group's ranks right after it, a process group of its own (distributed/parallel_state.py:
        "a separate process group to isolate EPLB communications")."""
        ranks = AxisLayout(("dp", t.dp), ("pp", t.pp), ("pcp", t.cp), ("tp", t.tp))
        out = [
            ranks.family("tp", group=("tp",)),
            _dcp(t),
            ranks.family("pcp", group=("pcp",)),
            ranks.family("pp", group=("pp",), over=("dp", "tp", "pcp")),
            ranks.family("dp", group=("dp",), over=("tp", "pp", "pcp")),
        ]
        if is_moe:
            out.append(ranks.family("ep", group=("dp", "pcp", "tp"), over=("pp",)))
        if is_moe and eplb:
            out.append(ranks.family("eplb", group=("dp", "pcp", "tp"), over=("pp",)))
        out.append(ranks.family("replica", group=("pp", ("pcp", "tp")), over=("dp",)))
        return tuple(out)

    def split_layers(self, num_layers: int, pp: int) -> list[int]:
        """get_pp_indices: remainder layers go to the stages before the last, filling
        backwards from index -2. 61 layers on 4 stages: [15, 15, 16, 15]."""
        parts = [num_layers // pp] * pp
        for i in range(2, num_layers % pp + 2):
            parts[-i] += 1
        return parts

    def attention_tp(self, t: Topology) -> int:
        return t.tp

    def num_replicas(self, t: Topology) -> int:
        return t.dp

    def sync_family(self, group: str) -> str:
        return "tp"  # vLLM has no attention-TP group of its own: tp is attention TP

    def startup_family(self, group: str) -> str:
        """EngineCore gathers each worker's available memory and sizes every worker's KV cache
        by the smallest (get_kv_cache_configs: "Change the num_blocks of each rank to the
        smallest among all ranks", v1/core/kv_cache_planning.py in 0.33.0, kv_cache_utils.py
        in 0.32): one engine's workers, its whole replica (tp x pp x cp), agree at start-up."""
        return "replica"

    def engine_held(self, site: Site) -> str | None:
        """A start-up MIN site (DFlash's / DSpark's free-memory reading): vLLM reads no
        per-rank free memory to choose a draft graph (the drafter captures by
        compilation_config.cudagraph_mode alone, v1/worker/gpu/spec_decode/dflash/speculator.py
        DFlashSpeculator.init_cudagraph_manager / capture), and the one free-memory reading it
        takes, the KV-cache size, is cut to the smallest over the engine's workers by the
        EngineCore whatever sync.policy says (v1/core/kv_cache_planning.py
        get_kv_cache_configs): so the reading selects no collective and is agreed over the
        replica."""
        if site.startup and site.kind == "min":
            return (f"engine {NAME}: the EngineCore cuts every worker's free-memory reading to "
                    "the smallest over the replica (get_kv_cache_configs), whatever sync.policy "
                    "says; no draft graph depends on it")
        return None

    def dp_agreement(self, spec: Spec) -> DpAgreement | None:
        """dp > 1 with MoE: expert parallel spans the dp ranks, so every round starts with
        num_tokens_across_dp, an all-reduce over the dp family."""
        t = spec.topology
        if t.dp == 1 or spec.model.moe is None:
            return None
        return DpAgreement("dp", t.dp, "all_reduce_sum", 1)

    def moe_layout(self, spec: Spec) -> MoeLayout:
        return MoeLayout("ep", False)

    def moe_layer_collectives(self, derived: Mapping[str, int], widths: Mapping[str, int],
                              moe: MoeRows) -> tuple[LayerCollective, ...]:
        """MoERunner._maybe_dispatch / _maybe_combine: with dp > 1 every MoE layer dispatches
        the rows over the ep group and combines them back (all-gather and reduce-scatter, or
        two all-to-alls with an all-to-all backend); with pcp > 1 and no all-to-all kernels
        the context-parallel ranks gather and reduce-scatter their rows over pcp."""
        out: tuple[LayerCollective, ...] = ()
        if widths["dp"] > 1:
            ops = ("all_to_all", "all_to_all") if moe.a2a != "none" else ("all_gather", "reduce_scatter")
            out = (LayerCollective(ops[0], "ep", "moe_dispatch"), LayerCollective(ops[1], "ep", "moe_combine"))
        if derived["pcp"] > 1 and moe.a2a == "none":
            out += (LayerCollective("all_gather", "pcp", "pcp_gather"),
                    LayerCollective("reduce_scatter", "pcp", "pcp_scatter"))
        return out

    def behaviour(self, spec: Spec, method: Method) -> Choices:
        # No convergence inside TP; vLLM has no free-memory gate on draft graphs (its KV-cache
        # sizing already takes the minimum over workers), so start-up MIN sites hold trivially.
        sites = {site.name: site.kind == "min" for site in method.sites}
        notes: tuple[str, ...] = (
            f"{self.title} (model runner V2): no convergence inside TP (identical logits and "
            "counter-based RNG keyed by seed and position); the last PP rank broadcasts "
            "sampled tokens and drafts down each PP column; aux taps chain through the "
            "stage handoff.",)
        draft_ids = ROWS[method.name].draft_layer_ids
        if draft_ids == "stage_local":
            notes += (STAGE_LOCAL_DRAFT_NOTE,)
        return Choices(behaviour="engine", engine_sites=sites, group="tp", relay="column",
                       relay_drafts=True, payload_width="agreed", draft_layer_ids=draft_ids,
                       tap_ids="global", aux_routing="chain", idle_ranks="dummy",
                       rng_is_float="counter-based RNG keyed by (seed, position) makes draws "
                       "rank-deterministic", lockstep_sites=frozenset(), notes=notes)

    def violations(self, spec: Spec) -> list[Violation]:
        t = spec.topology
        out = [*_sglang_only(t), *_dcp_rules(t, self.title), *self.moe_violations(spec, t.ep)]
        wide = t.dp * t.cp * t.tp
        if t.ep not in (1, wide):
            out.append(Violation(("topology", "ep"), f"ep={t.ep} must be 1 or dp*cp*tp = "
                                 f"{t.dp}*{t.cp}*{t.tp} = {wide}: expert parallel spans a whole "
                                 f"stage ({self.title} initialize_model_parallel, --enable-expert-parallel)"))
        moe = spec.model.moe
        if moe is not None and moe.eplb and t.ep == 1:
            out.append(Violation(("model", "moe", "eplb"), "eplb needs expert parallel: vLLM "
                                 "refuses --enable-eplb without --enable-expert-parallel "
                                 f"(\"enable_expert_parallel must be True to use EPLB\", {self.title} "
                                 f"ParallelConfig._validate_parallel_config); set topology.ep to "
                                 f"dp*cp*tp = {wide} or eplb false"))
        return out + self.node_violations(spec, self.world_size(t), "ParallelConfig.local_world_size")

    def gates(self, spec: Spec, choices: Choices) -> tuple[GateUse, ...]:
        return resolve_gates(GATES, spec, choices)

    def max_draft_tokens(self, topk: int, num_steps: int) -> tuple[int, str]:
        # vLLM 0.30 - 0.33.0 drafts a chain and verifies num_speculative_tokens + 1 tokens (no
        # speculative_token_tree, no tree attention backend; launch_refusal refuses topk > 1).
        # A tree spec on vLLM is specplan's own model (check, simulate): one level per step.
        return 1 + topk * num_steps, "1 + topk*num_steps"

    def launch_refusal(self, spec: Spec) -> str | None:
        t, s = spec.topology, spec.speculative
        if not self.runs(s.method):
            return f"vLLM has no speculative method {s.method!r}"
        if s.topk > 1:
            return f"vLLM has no tree verify: speculative.topk must be 1, found {s.topk}"
        if ROWS.method(s.method).speculates and s.verify_width != s.num_steps + 1:
            return (f"vLLM verifies num_speculative_tokens + 1 = {s.num_steps + 1} tokens; "
                    f"speculative.num_draft_tokens={s.num_draft_tokens} has no vLLM spelling")
        if t.ep not in (1, t.dp * t.cp * t.tp):
            return (f"vLLM expert parallel is all or nothing: ep must be 1 or dp * cp * tp = "
                    f"{t.dp * t.cp * t.tp}, found {t.ep}")
        if s.draft_tp not in (None, 1, t.tp):
            return (f"vLLM's draft_tensor_parallel_size is 1 or the target's tp {t.tp}, "
                    f"found speculative.draft_tp={s.draft_tp}")
        return None

    def handoff(self, connector: str) -> Rules:
        return RULES[connector]()


def _dcp(t: Topology) -> Family:
    """Chunks of dcp consecutive ranks in (tp, pcp) order, pcp fastest once pcp > 1 and
    dcp > 1; dcp = 1: one-rank groups in rank order, whatever pcp (initialize_model_parallel
    transposes the (pcp, tp) axes only when dcp_size > 1)."""
    dp, pp, pcp, tp, dcp = t.dp, t.pp, t.cp, t.tp, t.dcp
    if pcp == 1 or dcp == 1:  # (dp, pp, pcp) then tp chunks: rank order
        chunks = AxisLayout(("dp", dp), ("pp", pp), ("pcp", pcp), ("chunk", tp // dcp), ("dcp", dcp))
        return chunks.family("dcp", group=("dcp",), over=(("dp", "pp", "pcp"), "chunk"))
    if pcp % dcp == 0:
        chunks = AxisLayout(("dp", dp), ("pp", pp), ("chunk", pcp // dcp), ("dcp", dcp), ("tp", tp))
        return chunks.family("dcp", group=("dcp",), over=("dp", "pp", "tp", "chunk"))
    a = dcp // pcp  # tp ranks per chunk, each with all its pcp ranks
    chunks = AxisLayout(("dp", dp), ("pp", pp), ("pcp", pcp), ("chunk", tp // a), ("tp", a))
    return chunks.family("dcp", group=("tp", "pcp"), over=("dp", "pp", "chunk"))


def _dcp_rules(t: Topology, T: str = T) -> list[Violation]:
    at, where = ("topology", "dcp"), f"({T} ParallelConfig._validate_parallel_config)"
    if t.cp == 1 and t.tp % t.dcp:
        return [Violation(at, f"dcp={t.dcp} does not divide tp={t.tp} {where}")]
    allowed = sorted({1, t.cp, t.tp * t.cp})
    if t.cp > 1 and t.dcp not in allowed:
        return [Violation(at, f"dcp={t.dcp} with cp={t.cp}, tp={t.tp}: DCP must be off, span the "
                          f"PCP axis or span the whole TP x PCP axis, valid dcp: "
                          f"{', '.join(map(str, allowed))} {where}")]
    return []


def _sglang_only(t: Topology) -> list[Violation]:
    out = []
    if t.dp_attention:
        out.append(Violation(("topology", "dp_attention"), "dp_attention is an sglang option; "
                             "with engine vllm every dp rank already runs its own attention (set it false)"))
    if t.moe_dp != 1:
        out.append(Violation(("topology", "moe_dp"), f"moe_dp={t.moe_dp} is an sglang option; "
                             "expected 1 with engine vllm"))
    if t.dp_lm_head:
        out.append(Violation(("topology", "dp_lm_head"), "dp_lm_head is an sglang option "
                             "(--enable-dp-lm-head); vLLM shards the LM head over tp (set it false)"))
    return out
