"""The gates SGLang's code takes (engines/gates.py has the format and the rule), read from
SGLang 0.5.23 (the unpacked wheel's sglang/srt/...; paths below are under srt/).

Agreement under DP-attention: every per-round gate of the target and of the EAGLE drafter reads
values the scheduler has already all-gathered over the whole TP group (the token-count exchange,
scheduler_components/dp_attn.py prepare_mlp_sync_batch_raw, seven ints per rank: tokens, forward
mode, cuda-graph ok, draft cuda-graph ok, extend-in-batch, ...), so those gates are agreed over
tp. The start-up free-memory readings of DSpark and DFlash are agreed by SpecTpSync, which is
built on get_dp_tp_group() (attention TP under DP-attention, else TP) and drops every site on a
one-rank group (spec_tp_sync.py SpecTpSync.__init__); its MIN runs over the group the worker
passes to available_memory_gb.

Options the spec has no key for are read from the launch line the spec was imported from
(engine_args: `--disable-cuda-graph`, `--speculative-adaptive`, `--disable-overlap-schedule`,
SGLANG_RAGGED_VERIFY_MODE=...).
The EAGLE draft's graph-or-eager choice for DSA IndexShare models (sglang#32527) is agreed in
0.5.23: the DSA-seed readiness rides the draft graph bit the scheduler gathers over tp
(scheduler_components/dp_attn.py _spec_input_cuda_graph_compatible), so eagle_draft_graph holds.
"""

from __future__ import annotations

from collections.abc import Callable

from specplan.engines.choices import Choices
from specplan.engines.gates import Agreed, GateRow, Selected
from specplan.engines.reads import Spec

EAGLE_WORKER = ("eagle", "eagle3", "mtp", "standalone")  # EAGLEWorkerV2 runs these


def _dpa(spec: Spec) -> bool:
    t = spec.topology
    return bool(t.dp_attention and t.dp > 1)


def _attn_tp(spec: Spec) -> int:
    t = spec.topology
    return t.tp // (t.dp if t.dp_attention else 1) // t.cp


def _dp_tp_group(spec: Spec) -> tuple[str, int]:
    """get_dp_tp_group() (layers/dp_attention.py): attention TP with DP-attention, else TP."""
    if spec.topology.dp_attention:
        return "attn_tp", _attn_tp(spec)
    return "tp", spec.topology.tp


def _flag(spec: Spec, name: str) -> bool:
    """Whether the launch line the spec was imported from (engine_args) passes `name`."""
    return any(arg.split(" ", 1)[0] == name for arg in spec.engine_args or ())


def _env(spec: Spec, name: str) -> str | None:
    """The value the launch line (engine_args) gives environment variable `name`, if any."""
    for arg in spec.engine_args or ():
        key, eq, value = arg.partition("=")
        if eq and key == name:
            return value
    return None


def _ragged_budget(spec: Spec) -> bool:
    """DSpark's verify budget is scheduled under a non-static SGLANG_RAGGED_VERIFY_MODE
    (dspark_planner.py DSparkVerifyPlanner.__init__): from the ConfidenceRelay ring under the
    overlap scheduler, in step (compute_budget_sync) without it."""
    return _env(spec, "SGLANG_RAGGED_VERIFY_MODE") in ("cap-accept", "compact")


def _budget_agreed(spec: Spec, choices: Choices) -> tuple[str | None, str]:
    where = ("in step (DSparkVerifyPlanner.compute_budget_sync)"
             if _flag(spec, "--disable-overlap-schedule") else
             "only on a rank whose CUDA event query (copy_done[slot].query()) found the "
             "confidence copy done (ConfidenceRelay.resolve)")
    return None, (f"the budget is computed {where} from this rank's own confidence-head "
                  "outputs, which no site broadcasts (DSPARK_DRAFT carries the tokens, "
                  "DSPARK_PLAN the verify_lens; sglang PR #31195 logs TP0 0.811, TP1 0.810); "
                  "no collective agrees it")


def _budget_selects(spec: Spec) -> tuple[Selected, ...]:
    sync, size = _dp_tp_group(spec)
    out: tuple[Selected, ...] = (
        Selected("broadcast", sync, "DSPARK_PLAN's verify_lens broadcast, issued only when "
                 "the budget is present (DSparkVerifyPlanner.schedule_verify_lens)"),) \
        if size > 1 else ()
    if not _dpa(spec):  # under DP-attention the tier is all-gathered over tp instead
        out += (Selected("all_reduce", "tp", "the target verify forward at the graph tier the "
                         "budget picks (dynamic graph tier): its token count sets every "
                         "collective's shape"),)
    return out


def _captures(spec: Spec) -> bool:
    """Decode graphs are captured at all: a CUDA-like device, not a PD prefill node, and no
    --disable-cuda-graph on the line (cuda_graph_config.decode.backend DISABLED)."""
    d = spec.disaggregation
    return spec.topology.device in ("cuda", "rocm") and not (d is not None and d.role == "prefill") \
        and not _flag(spec, "--disable-cuda-graph")


def _adaptive(spec: Spec) -> bool:
    """--speculative-adaptive as SGLang keeps it on (adaptive_spec_params.py
    adaptive_unsupported_reason: EAGLE / EAGLE3, topk 1, no attention DP)."""
    return _flag(spec, "--speculative-adaptive") and spec.speculative.topk == 1 and not _dpa(spec)


def _site_on(choices: Choices, site: str) -> bool:
    sites = choices.engine_sites
    return True if sites is None else bool(sites.get(site, False))


def _memory_agreed(site: str, slug: str, group: Callable[[Spec], str]) -> Agreed:
    """SpecTpSync.available_memory_gb: MIN over `group(spec)` when the site is on, which it
    is only when get_dp_tp_group() has more than one rank."""
    def agreed(spec: Spec, choices: Choices) -> tuple[str | None, str]:
        sync, size = _dp_tp_group(spec)
        if not _site_on(choices, site):
            return None, (f"SGLANG_SPEC_TP_SYNC leaves {slug} off, so each rank reads its own "
                          "free memory (spec_tp_sync.py SpecTpSync.available_memory_gb)")
        if size == 1:
            return None, (f"SpecTpSync is built on get_dp_tp_group() ({sync}, one rank here) and "
                          f"drops every site, {slug} included: each rank reads its own free "
                          "memory (spec_tp_sync.py SpecTpSync.__init__)")
        return group(spec), (f"SpecTpSync.available_memory_gb: MIN over {group(spec)} "
                             f"({slug} on, SpecTpSync on {sync})")
    return agreed


def _dspark_draft_group(spec: Spec) -> str:
    """_draft_graph_group = draft_parallel_layout.tp_group or parallel.tp_group: a MoE
    (DeepSeek-V4) draft keeps the target layout (models/deepseek_v4_dspark.py
    draft_parallel_spec TARGET_LAYOUT), so the whole TP group; a dense draft under
    DP-attention runs on attention TP (draft_parallel.py resolve_draft_parallel_layout)."""
    return "attn_tp" if _dpa(spec) and spec.model.moe is None else "tp"


def _dspark_selects(spec: Spec) -> tuple[Selected, ...]:
    moe = " (a MoE draft's expert all-reduce over tp under DP-attention)" \
        if _dpa(spec) and spec.model.moe is not None else ""
    return (Selected("capture", _dspark_draft_group(spec), "draft CUDA-graph capture: a warm-up "
                     f"draft forward per captured batch size, each with the draft's collectives{moe}"),)


def _over_tp(what: str) -> Agreed:
    def agreed(spec: Spec, choices: Choices) -> tuple[str | None, str]:
        return "tp", (f"{what} from the token counts all-gathered over tp "
                      "(scheduler_components/dp_attn.py prepare_mlp_sync_batch_raw)")
    return agreed


def _target_collectives(spec: Spec) -> tuple[Selected, ...]:
    out: tuple[Selected, ...] = (Selected("all_gather", "tp", "DP-attention's gather of every DP rank's tokens "
                    "before the MLP / MoE (dp_gather), padded to the padding mode"),)
    if _attn_tp(spec) > 1:
        out += (Selected("all_reduce", "attn_tp", "attention's tensor-parallel all-reduce"),)
    return out


def _dpa_graphs(spec: Spec) -> bool:
    """DP-attention with decode graphs captured: each step replays a graph or runs eagerly."""
    return _dpa(spec) and _captures(spec)


def _dp_target_gate(name: str, function: str, when: Callable[[Spec], bool], what: str,
                    doc: str) -> GateRow:
    """A DP-attention step's choice (`what` is chosen or read from the token counts gathered
    over tp) that shapes the target's collectives, for every method."""
    return GateRow(name=name, phase="decode", input="global", function=function, methods=(),
                   when=when, agreed=_over_tp(what), selects=_target_collectives, doc=doc)


GATES: tuple[GateRow, ...] = (
    GateRow(
        name="dspark_draft_graph_mem", phase="startup", input="rank_local",
        function="speculative/dspark_components/dspark_worker_v2.py DSparkWorkerV2.init_cuda_graphs",
        methods=("dspark",), when=_captures,
        agreed=_memory_agreed("dspark_mem", "dspark-mem", _dspark_draft_group),
        selects=_dspark_selects, carrier="dspark_mem",
        doc="Below 1 GiB of free memory a rank skips the draft's CUDA-graph capture; a rank "
            "that captures issues the capture's collectives over the draft's graph group, one "
            "that does not waits elsewhere."),
    GateRow(
        name="dflash_draft_graph_mem", phase="startup", input="rank_local",
        function="speculative/dflash_worker_v2.py DFlashWorkerV2.init_cuda_graphs",
        methods=("dflash",),
        # Under DP-attention the capture is off on every rank (a launch fact, no gate).
        when=lambda spec: spec.topology.device == "cuda" and not spec.topology.dp_attention,
        agreed=_memory_agreed("dflash_mem", "dflash-mem", lambda spec: "tp"),
        selects=lambda spec: (Selected("capture", "tp", "draft CUDA-graph capture: a warm-up "
                                       "draft forward per captured batch size over tp"),),
        carrier="dflash_mem",
        doc="Below 1 GiB of free memory a rank skips the DFlash draft's CUDA-graph capture."),
    _dp_target_gate(
        name="dp_padding_mode", function="layers/dp_attention.py DpPaddingMode.get_dp_padding_mode",
        when=_dpa, what="the padding mode is chosen",
        doc="MAX_LEN pads every DP rank's tokens to the largest and all-gathers; SUM_LEN "
            "all-reduces the concatenation: the two issue collectives of different shapes."),
    _dp_target_gate(
        name="dp_idle_forward",
        function="managers/scheduler_components/dp_attn.py SchedulerDPAttnAdapter.get_idle_batch",
        when=_dpa, what="a rank with no requests runs an idle batch",
        doc="A DP rank with no requests runs an idle (dummy) forward so that its peers' "
            "MLP / MoE collectives over tp find it."),
    _dp_target_gate(
        name="target_graph",
        function="model_executor/runner/decode_cuda_graph_runner.py DecodeCudaGraphRunner.can_run_graph",
        when=_dpa_graphs, what="can_run_decode_cuda_graph and the batch size are read",
        doc="Replay the target's captured graph (padded to a captured size) or run eagerly "
            "(the actual token count): the collectives differ in shape."),
    GateRow(
        name="eagle_draft_graph", phase="decode", input="global",
        function="speculative/eagle_draft_cuda_graph_runner.py EAGLEDraftCudaGraphRunner.can_run_graph",
        methods=EAGLE_WORKER, when=_dpa_graphs,
        agreed=_over_tp("can_run_dp_draft_cuda_graph and max(global_num_tokens) are read"),
        selects=lambda spec: (Selected("all_gather", "tp", "the draft forward's DP gather "
                                       "(padded in the graph, actual size eagerly)"),),
        doc="The draft replays its graph or runs eagerly; idle and busy DP ranks must take "
            "the same path (the 2026 PD-decode deadlock took them apart)."),
    GateRow(
        name="eagle_adaptive_steps", phase="decode", input="global",
        function="speculative/adaptive_runtime_state.py AdaptiveController.on_verify_complete",
        methods=("eagle", "eagle3"), when=_adaptive,
        agreed=lambda spec, choices: ("tp", "an EMA of the accept lengths, which every TP rank "
                                      "holds alike (eagle_sample broadcasts them on sampling "
                                      "paths; greedy rests on identical logits, check's WARN "
                                      "at the accept site)"),
        selects=lambda spec: (Selected("all_reduce", "tp", "the draft forwards of a round: "
                                       "speculative_num_steps sets how many run, each with its "
                                       "all-reduces"),),
        carrier="{method}_accept",
        doc="--speculative-adaptive switches the step count between captured tiers from the "
            "accept lengths it has seen; ranks on different tiers run different numbers of "
            "draft forwards."),
    GateRow(
        name="dspark_verify_budget", phase="decode", input="rank_local",
        function="managers/overlap_utils.py ConfidenceRelay.resolve (dspark_planner.py "
                 "DSparkVerifyPlanner.prepare_verify_budget; compute_budget_sync without overlap)",
        methods=("dspark",), when=_ragged_budget, agreed=_budget_agreed,
        selects=_budget_selects, carrier="dspark_plan_verify",
        doc="A rank with a budget plans ragged verify lengths, broadcasts them and picks a "
            "verify graph tier; a rank without one verifies every draft at the full width."),
)
