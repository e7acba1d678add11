"""The gates vLLM's code takes (engines/gates.py has the format and the rule), read from vLLM
0.33.0's model runner V2 (the unpacked wheel's vllm/...; paths below are under vllm/).

Who agrees what. One EngineCore drives every worker of a replica (tp x pcp x pp) with one
SchedulerOutput, so a choice made from it is the replica's. Data parallel with a MoE model
runs the engines in lockstep (DPEngineCoreProc); a dense model's DP ranks are independent
engines (v1/engine/core.py EngineCoreProc.run_engine_core: "Non-MoE DP ranks are completely
independent, so treat like DP=1"). In lockstep every step's CUDA-graph descriptor and DP
padding is agreed by a 7 x dp cpu all-reduce over the DP group
(v1/worker/gpu/dp_utils.py sync_cudagraph_and_dp_padding: token counts, graph mode, uniform
decode length, max query length, micro-batching, request counts, skip-drafts votes; "Every
field is identical on every rank ... Never add a per-rank value here"): with the replica's one
scheduler output, that agrees it over the whole stage (dp x pcp x tp), the ep family's groups.

Found in the code and not declared as rows, because no value a rank reads there selects a
collective (docs/engines.md, "Gates", lists them with the SGLang ones):
- the drafters' CUDA-graph capture (EAGLE, MTP, DFlash, DSpark, draft model) follows
  compilation_config.cudagraph_mode alone (v1/worker/gpu/spec_decode/dflash/speculator.py
  DFlashSpeculator.init_cudagraph_manager / capture); vLLM reads no free memory for it;
- the KV-cache size is each worker's free-memory reading, cut to the smallest over the
  engine's workers by the EngineCore (v1/core/kv_cache_planning.py get_kv_cache_configs);
  it selects no collective (Convention.engine_held keeps DFlash's / DSpark's start-up MIN
  site agreed by the engine, issue 37);
- adaptive verification's start-up profile runs one dummy batch per captured size on every
  rank (GPUModelRunner.capture_model, AdaptiveVerificationManager.batches_to_profile): the
  count is the configuration's;
- dynamic speculative decoding (num_speculative_tokens_per_batch_size) picks K from the
  replica's own batch size in its scheduler, and vLLM turns it off under DP
  (config/vllm.py VllmConfig._maybe_disable_dynamic_sd_for_data_parallel: "data-parallel
  ranks can select different speculative-token counts, causing DP divergence and deadlocks").
"""

from __future__ import annotations

import json
import shlex

from specplan.engines.choices import Choices
from specplan.engines.gates import GateRow, Input, Selected
from specplan.engines.reads import Spec

DRAFT_MODELS = ("eagle", "eagle3", "mtp", "standalone", "dflash", "dspark")  # not ngram


def _lockstep(spec: Spec) -> bool:
    """DP ranks step together: dp > 1 with a MoE model (DPEngineCoreProc)."""
    return spec.topology.dp > 1 and spec.model.moe is not None


def _stage(spec: Spec, choices: Choices | None = None) -> tuple[str, str]:
    """The family a per-step choice is agreed over: the stage (ep's groups) in lockstep DP,
    else the replica, from its one SchedulerOutput."""
    if _lockstep(spec):
        return "ep", ("the replica's one SchedulerOutput, then the 7 x dp cpu all-reduce over "
                      "dp (v1/worker/gpu/dp_utils.py sync_cudagraph_and_dp_padding): every rank "
                      "of the stage holds the same DPSyncState")
    return "replica", ("the replica's one SchedulerOutput, broadcast by the EngineCore to every "
                       "worker (each DP rank of a dense model is its own engine)")


def _forward(spec: Spec, reduce: str, gather: str) -> tuple[Selected, ...]:
    """A target forward's collectives: its tensor-parallel all-reduces over tp (`reduce`: what
    fixes their shape) and prefill context parallel's gather of the rows over pcp (`gather`)."""
    t = spec.topology
    out: tuple[Selected, ...] = ()
    if t.tp > 1:
        out += (Selected("all_reduce", "tp", reduce),)
    if t.cp > 1:
        out += (Selected("all_gather", "pcp", gather),)
    return out


def _moe_rows(spec: Spec, what: str) -> tuple[Selected, ...]:
    """In lockstep DP, a MoE forward's dispatch / combine of every DP rank's rows over ep."""
    return (Selected("all_to_all", "ep", what),) if _lockstep(spec) else ()


def _target(spec: Spec) -> tuple[Selected, ...]:
    """The target forward's collectives whose shape the step's descriptor fixes."""
    return _forward(spec, "the target forward's tensor-parallel all-reduces over the "
                    "graph-padded token count (graph) or the actual one (eager)",
                    "prefill context parallel's gather of the step's rows (padded with the "
                    "batch)") + \
        _moe_rows(spec, "the MoE dispatch / combine of every DP rank's rows, sized by "
                  "num_tokens_across_dp")


def _drafts_span_ranks(spec: Spec) -> bool:
    """A drafter step issues collectives: tp > 1, or a MoE draft in lockstep DP."""
    return spec.topology.tp > 1 or _lockstep(spec)


def _draft(spec: Spec) -> tuple[Selected, ...]:
    """A drafter step's collectives: the vocab-parallel lm_head's argmax gather over tp
    (layers/logits_processor.py LogitsProcessor.get_top_tokens), a MoE draft's rows over ep."""
    gather = (Selected("all_gather", "tp", "the drafter's vocab-parallel argmax gather and its "
                       "layers' all-reduces, once per draft step"),) if spec.topology.tp > 1 else ()
    return gather + _moe_rows(spec, "a MoE draft's dispatch / combine (the target's experts for "
                              "MTP), once per draft step")


def _draft_gate(name: str, input: Input, function: str, how: str, doc: str) -> GateRow:
    """A choice a drafter step takes from what the target step agreed: the drafters' methods,
    the stage's family (_stage), the drafter's collectives."""
    return GateRow(name=name, phase="decode", input=input, function=function,
                   methods=DRAFT_MODELS, when=_drafts_span_ranks,
                   agreed=lambda spec, choices: (_stage(spec)[0], how), selects=_draft, doc=doc)


def _args(spec: Spec) -> list[str]:
    """The launch line's words: each engine_args item is one shell-quoted argument (or a few)."""
    out: list[str] = []
    for arg in spec.engine_args or ():
        try:
            out += shlex.split(arg)
        except ValueError:  # an unbalanced quote: the item as written
            out.append(arg)
    return out


def flag_on(spec: Spec, name: str) -> bool:
    """The last of `--name` / `--no-name` / `--disable-...` in the launch line wins."""
    on = False
    stem = name[len("--enable-"):] if name.startswith("--enable-") else name[2:]
    for arg in _args(spec):
        key = arg.split("=", 1)[0]
        if key == name:
            on = "=" not in arg or arg.split("=", 1)[1].lower() not in ("false", "0")
        elif key in (f"--no-{name[2:]}", f"--disable-{stem}"):
            on = False
    return on


def speculative_key(spec: Spec, key: str) -> object:
    """`key` of the launch line's --speculative-config (JSON, `=JSON`, or `.key value`)."""
    args = _args(spec)
    found: object = None
    for i, arg in enumerate(args):
        head, _, inline = arg.partition("=")
        if head == "--speculative-config":
            text = inline or (args[i + 1] if i + 1 < len(args) else "")
            try:
                found = json.loads(text).get(key, found)
            except (ValueError, AttributeError):
                pass
        elif head == f"--speculative-config.{key}":
            value = inline or (args[i + 1] if i + 1 < len(args) else "")
            found = value.lower() in ("true", "1") if value.lower() in ("true", "false", "0", "1") else value
    return found


def _adaptive(spec: Spec) -> bool:
    return bool(speculative_key(spec, "enable_adaptive_verification"))


def _budget_agreed(spec: Spec, choices: Choices) -> tuple[str | None, str]:
    return None, ("set_cost_curves broadcasts rank 0's cost curves over TP, but get_num_tokens "
                  "ranks this rank's own copy of the confidence head's outputs "
                  "(_stale_confidences): no collective agrees the budget, and the "
                  "confidences differ across TP ranks in their last bits (vllm#56831)")


def _budget_selects(spec: Spec) -> tuple[Selected, ...]:
    return _forward(spec, "the verify forward's all-reduces over the budget-trimmed token count",
                    "prefill context parallel's gather of the budget-trimmed rows")


def _owner_agreed(spec: Spec, choices: Choices) -> tuple[str | None, str]:
    return "tp", ("owner = request slot % tp, a pure function of the replicated idx_mapping: "
                  "every TP rank assigns slots alike and frees them in sorted order "
                  "(BatchShardMetadata; GPUModelRunner.finish_requests)")


GATES: tuple[GateRow, ...] = (
    GateRow(
        name="step_batch_descriptor", phase="decode", input="batch_local",
        function="v1/worker/gpu/dp_utils.py dispatch_cg_and_sync_dp (GPUModelRunner.execute_model)",
        methods=(), when=lambda spec: spec.topology.tp * spec.topology.cp > 1 or _lockstep(spec),
        agreed=_stage, selects=_target,
        doc="The step's CUDA-graph descriptor (FULL / PIECEWISE replay padded to a captured "
            "size, or eager at the actual count) and its DP padding: the target's collectives "
            "take that shape."),
    GateRow(
        name="dp_idle_dummy_batch", phase="decode", input="global",
        function="v1/engine/core.py DPEngineCoreProc.run_busy_loop (execute_dummy_batch, "
                 "GPUModelRunner._dummy_run)",
        methods=(), when=_lockstep,
        agreed=lambda spec, choices: ("ep", "engines_running, all-reduced over dp every "
                                      "dp_sync_interval steps (DPEngineCoreProc."
                                      "_has_global_unfinished_reqs, ParallelConfig.sync_dp_state), "
                                      "read by every worker of the replica from its one EngineCore"),
        selects=lambda spec: (Selected("all_reduce", "dp", "the step's 7 x dp DP-sync all-reduce, "
                                       "which an idle rank meets only by running a dummy batch"),
                              *_target(spec)),
        doc="A DP engine without requests runs a dummy batch (and the drafter's propose) while "
            "the wave runs, so that its peers' DP sync and MoE collectives find it."),
    _draft_gate(
        name="skip_drafts", input="batch_local",
        function="v1/worker/gpu/model_runner.py GPUModelRunner.execute_model "
                 "(DPSyncState.skip_drafts; num_spec_tokens_to_schedule 0)",
        how="the scheduler's skip_drafts, voted over dp (all must allow) in "
            "sync_cudagraph_and_dp_padding under lockstep DP, else the replica's one SchedulerOutput",
        doc="A step whose requests cannot use drafts proposes none (K = 0): the drafter's "
            "per-step collectives run or do not."),
    _draft_gate(
        name="draft_batch_descriptor", input="global",
        function="v1/worker/gpu/spec_decode/speculator.py "
                 "DraftModelSpeculator._build_uniform_batch_dp_sync (each speculator's propose)",
        how="the target step's DPSyncState, reused with no collective of its own: every "
            "drafter pads to target num_reqs x query length",
        doc="The drafter's graph-or-eager choice and padding per draft step, taken from the "
            "target step's agreed descriptor."),
    GateRow(
        name="adaptive_verify_budget", phase="decode", input="rank_local",
        function="v1/worker/gpu/spec_decode/adaptive_verification.py "
                 "AdaptiveVerificationManager.get_num_tokens",
        methods=("dspark",), when=_adaptive, agreed=_budget_agreed, selects=_budget_selects,
        doc="DSpark's adaptive verification trims the drafts each step to the budget its cost "
            "tables (profiled on the rank's own timings) and confidences pick: the verify "
            "forward's token count."),
    GateRow(
        name="batch_shard_owner", phase="decode", input="batch_local",
        function="v1/worker/gpu/sample/batch_shard.py BatchSharder.shard_sampler_inputs / "
                 "gather_sampler_output",
        methods=(), when=lambda spec: spec.topology.tp > 1 and flag_on(spec, "--enable-batch-sharded-sampling"),
        agreed=_owner_agreed,
        selects=lambda spec: (Selected("all_to_all", "tp", "the owners' logits rows "
                                       "(all_to_all_single split sizes per owner)"),
                              Selected("all_gather", "tp", "the owners' packed sampler outputs, "
                                       "padded to max_num_reqs_per_rank")),
        doc="--enable-batch-sharded-sampling samples and accepts each request on one owner "
            "rank, then all-gathers the results over TP: the owner rows size both collectives."),
)
