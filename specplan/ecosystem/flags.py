"""The engines' launch options specplan reads and writes, as data.

Every name below was read from the released wheels (`pip download --no-deps`), never guessed:

- SGLang 0.5.23 (sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl). ServerArgs fields are
  declared in sglang/srt/arg_groups/fields/*.py; `add_cli_args_from_dataclass`
  (sglang/srt/arg_groups/arg_utils.py) turns field `a_b` into `--a-b` plus its aliases.
  `--enable-dp-attention` is a deprecated flag registered in sglang/srt/server_args.py
  (`--dp-size N --enable-dp-attention` resolves to `--attn-dp-size N`, parallel_hook.py).
  Environment: sglang/srt/environ.py (SGLANG_SPEC_TP_SYNC, SGLANG_ENABLE_PP_SPEC) and
  sglang/srt/distributed/utils.py get_pp_indices (SGLANG_PP_LAYER_PARTITION, os.getenv).
  Site slugs: sglang/srt/speculative/spec_tp_sync.py (slug = name.lower() with "-").
- vLLM 0.33.0 (vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl). `vllm serve [model_tag]`
  (vllm/entrypoints/cli/serve.py); EngineArgs flags in vllm/engine/arg_utils.py
  (add_cli_args); `--speculative-config` keys and method names in vllm/config/speculative.py
  (SpeculativeConfig, SpeculativeMethod); frontend flags in vllm/entrypoints/common/cli_args.py;
  environment in vllm/envs.py (VLLM_PP_LAYER_PARTITION, VLLM_USE_V2_MODEL_RUNNER).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    """One engine option: its spelling, what it sets in the engine, the spec key it carries."""

    name: str
    sets: str
    key: str | None  # the spec key it reads / writes; None when it carries no spec value
    aliases: tuple[str, ...] = ()
    takes_value: bool = True
    source: str = ""  # the wheel file that declares it


_SG_PAR = "sglang/srt/arg_groups/fields/parallel.py"
_SG_SPEC = "sglang/srt/arg_groups/fields/spec.py"
_SG_MODEL = "sglang/srt/arg_groups/fields/model.py"

SGLANG_FLAGS: tuple[Flag, ...] = (
    Flag("--model-path", "target checkpoint", "model.path", ("--model",), source=_SG_MODEL),
    Flag("--tp-size", "tensor parallel size of one stage", "topology.tp",
         ("--tensor-parallel-size",), source=_SG_PAR),
    Flag("--pp-size", "pipeline stages", "topology.pp", ("--pipeline-parallel-size",),
         source=_SG_PAR),
    Flag("--dp-size", "independent data-parallel replicas (worlds)", "topology.dp",
         ("--data-parallel-size",), source=_SG_PAR),
    Flag("--attn-dp-size", "DP-attention: attention replicas inside the TP block", "topology.dp",
         ("--attention-data-parallel-size",), source=_SG_PAR),
    Flag("--enable-dp-attention", "deprecated spelling: --dp-size N --enable-dp-attention "
         "means --attn-dp-size N", "topology.dp_attention", takes_value=False,
         source="sglang/srt/server_args.py"),
    Flag("--attn-cp-size", "attention context parallel inside the TP block", "topology.cp",
         ("--attention-context-parallel-size",), source=_SG_PAR),
    Flag("--dcp-size", "decode context parallel inside the attention TP group", "topology.dcp",
         ("--decode-context-parallel-size",), source=_SG_PAR),
    Flag("--ep-size", "expert parallel: moe_ep inside the TP block", "topology.ep",
         ("--expert-parallel-size", "--ep"), source=_SG_PAR),
    Flag("--moe-dp-size", "MoE data parallel inside the TP block", "topology.moe_dp",
         ("--moe-data-parallel-size",), source=_SG_PAR),
    Flag("--nnodes", "machines", "topology.nodes", source=_SG_PAR),
    Flag("--device", "accelerator kind", "topology.device",
         source="sglang/srt/arg_groups/fields/device.py"),
    Flag("--dtype", "weight and activation dtype", "model.dtype", source=_SG_MODEL),
    Flag("--speculative-algorithm", "speculative method", "speculative.method", source=_SG_SPEC),
    Flag("--speculative-num-steps", "draft steps", "speculative.num_steps", source=_SG_SPEC),
    Flag("--speculative-eagle-topk", "draft tree branching", "speculative.topk", source=_SG_SPEC),
    Flag("--speculative-num-draft-tokens", "verify width including the root",
         "speculative.num_draft_tokens", source=_SG_SPEC),
    Flag("--speculative-dspark-block-size", "DSpark gamma (verify window gamma + 1)",
         "speculative.num_steps", source=_SG_SPEC),
    Flag("--speculative-dflash-block-size", "DFlash block size (num_steps + 1)",
         "speculative.num_steps", source=_SG_SPEC),
    Flag("--speculative-draft-model-path", "draft checkpoint", "speculative.draft_path",
         ("--speculative-draft-model",), source=_SG_SPEC),
    Flag("--disable-overlap-schedule", "turn the overlap scheduler off (pipeline parallel "
         "requires it)", None, takes_value=False,
         source="sglang/srt/arg_groups/fields/schedule.py"),
    Flag("--disaggregation-mode", "prefill or decode instance of a PD deployment",
         "disaggregation.role", source="sglang/srt/arg_groups/fields/disagg.py"),
    Flag("--disaggregation-transfer-backend", "KV transfer backend", "disaggregation.connector",
         source="sglang/srt/arg_groups/fields/disagg.py"),
)

# Real SGLang options with no bearing on the plan: import accepts and ignores them.
SGLANG_IGNORED: tuple[Flag, ...] = tuple(
    Flag(name, "no bearing on the plan", None, takes_value=value, source=src)
    for name, value, src in (
        ("--host", True, "fields/serving.py"), ("--port", True, "fields/serving.py"),
        ("--served-model-name", True, "fields/serving.py"),
        ("--tokenizer-path", True, "fields/serving.py"),
        ("--trust-remote-code", False, "fields/model.py"),
        ("--context-length", True, "fields/model.py"),
        ("--quantization", True, "fields/model.py"),
        ("--kv-cache-dtype", True, "fields/model.py"),
        ("--mem-fraction-static", True, "fields/schedule.py"),
        ("--chunked-prefill-size", True, "fields/schedule.py"),
        ("--random-seed", True, "fields/device.py"),
        ("--max-running-requests", True, "fields/schedule.py"),
        ("--log-level", True, "fields/observability.py"),
        ("--dist-init-addr", True, "fields/parallel.py"),
        ("--node-rank", True, "fields/parallel.py"),
        ("--disaggregation-mode", True, "fields/disagg.py"),
    )
)

_VL_ARGS = "vllm/engine/arg_utils.py"

VLLM_FLAGS: tuple[Flag, ...] = (
    Flag("--model", "target checkpoint (also `vllm serve MODEL`)", "model.path", source=_VL_ARGS),
    Flag("--tensor-parallel-size", "tensor parallel size", "topology.tp", ("-tp",), source=_VL_ARGS),
    Flag("--pipeline-parallel-size", "pipeline stages", "topology.pp", ("-pp",), source=_VL_ARGS),
    Flag("--data-parallel-size", "data parallel replicas", "topology.dp", ("-dp",), source=_VL_ARGS),
    Flag("--prefill-context-parallel-size", "prefill context parallel (multiplies the world)",
         "topology.cp", ("-pcp",), source=_VL_ARGS),
    Flag("--decode-context-parallel-size", "decode context parallel inside the TP group",
         "topology.dcp", ("-dcp",), source=_VL_ARGS),
    Flag("--enable-expert-parallel", "experts across dp * pcp * tp ranks", "topology.ep",
         ("-ep",), takes_value=False, source=_VL_ARGS),
    Flag("--no-enable-expert-parallel", "experts stay tensor parallel", "topology.ep",
         takes_value=False, source=_VL_ARGS),
    Flag("--nnodes", "machines", "topology.nodes", ("-n",), source=_VL_ARGS),
    Flag("--dtype", "weight and activation dtype", "model.dtype", source=_VL_ARGS),
    Flag("--speculative-config", "speculative decoding (JSON)", "speculative",
         ("-sc",), source=_VL_ARGS),
    Flag("--kv-transfer-config", "KV connector and role of a PD instance (JSON: kv_connector, "
         "kv_role)", "disaggregation", source=_VL_ARGS),
)

VLLM_IGNORED: tuple[Flag, ...] = tuple(
    Flag(name, "no bearing on the plan", None, takes_value=value, source=src)
    for name, value, src in (
        ("--host", True, "entrypoints/common/cli_args.py"),
        ("--port", True, "entrypoints/common/cli_args.py"),
        ("--served-model-name", True, _VL_ARGS), ("--tokenizer", True, _VL_ARGS),
        ("--trust-remote-code", False, _VL_ARGS), ("--max-model-len", True, _VL_ARGS),
        ("--quantization", True, _VL_ARGS), ("--kv-cache-dtype", True, _VL_ARGS),
        ("--gpu-memory-utilization", True, _VL_ARGS), ("--seed", True, _VL_ARGS),
        ("--enforce-eager", False, _VL_ARGS), ("--node-rank", True, _VL_ARGS),
        ("--max-num-seqs", True, _VL_ARGS),
        ("--master-addr", True, _VL_ARGS), ("--master-port", True, _VL_ARGS),
        ("--data-parallel-address", True, _VL_ARGS), ("--data-parallel-rpc-port", True, _VL_ARGS),
        ("--data-parallel-size-local", True, _VL_ARGS),
    )
)

# speculative.method -> SGLang --speculative-algorithm (fields/spec.py lists the builtins:
# EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK, UNO; NEXTN aliases EAGLE).
SGLANG_ALGORITHMS = {"eagle": "EAGLE", "eagle3": "EAGLE3", "mtp": "NEXTN",
                     "standalone": "STANDALONE", "ngram": "NGRAM", "dflash": "DFLASH",
                     "dspark": "DSPARK"}
# speculative.method -> vLLM speculative_config.method (vllm/config/speculative.py
# SpeculativeMethod; "mtp" is one of MTPModelTypes, "draft_model" the standalone drafter).
VLLM_METHODS = {"eagle": "eagle", "eagle3": "eagle3", "mtp": "mtp", "standalone": "draft_model",
                "ngram": "ngram", "dflash": "dflash", "dspark": "dspark"}
# speculative_config keys import reads, and the other SpeculativeConfig fields it accepts
# and ignores (tuning knobs with no bearing on the plan).
VLLM_SPEC_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")
VLLM_SPEC_IGNORED = (
    "enforce_eager", "quantization", "moe_backend", "attention_backend", "kv_cache_dtype",
    "max_model_len", "revision", "code_revision", "disable_padded_drafter_batch",
    "prompt_lookup_max", "prompt_lookup_min", "parallel_drafting", "draft_sample_method",
    "rejection_sample_method", "dspark_draft_topk", "use_local_argmax_reduction")

# dtype spellings both engines accept for --dtype.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                 "float": "fp32"}

# SGLang SpecTpSyncSite slugs and numbers (spec_tp_sync.py), presets, and the retired
# handles that now select dspark-draft.
SGLANG_SITES = {"dspark-mem": 1, "dspark-plan": 7, "dspark-accept-greedy": 8,
                "dspark-accept-sample": 9, "dspark-accept-graph": 10, "dspark-target": 11,
                "dspark-draft": 17, "dflash-mem": 12, "dflash-selector": 13,
                "dflash-accept-sample": 14, "dflash-accept-greedy": 15, "dflash-target": 16}
SGLANG_PRESETS = {
    "all": frozenset(SGLANG_SITES),
    "off": frozenset(),
    "none": frozenset(),
    "init": frozenset({"dspark-mem", "dflash-mem"}),
    "rng": frozenset({"dspark-mem", "dflash-mem", "dspark-accept-sample", "dspark-target",
                      "dflash-selector", "dflash-accept-sample", "dflash-target"}),
}
SGLANG_RETIRED = ("dspark-draft-greedy", "dspark-draft-sample", "dspark-draft-multinomial",
                  "dspark-graph-sample", "dspark-graph-greedy", "2", "3", "4", "5", "6")

# specplan site -> the SGLang slugs that carry its decisions. A slug listed twice travels
# with its twin: DSPARK_ACCEPT_GRAPH is the in-graph form of the greedy accept, and
# DFLASH_SELECTOR the selector form of the sampled accept (methods/dspark.py, dflash.py).
SITE_SLUGS = {
    "dspark_mem": ("dspark-mem",), "dspark_plan": ("dspark-plan",),
    "dspark_accept_greedy": ("dspark-accept-greedy", "dspark-accept-graph"),
    "dspark_accept_sample": ("dspark-accept-sample",), "dspark_target": ("dspark-target",),
    "dspark_draft": ("dspark-draft",), "dflash_mem": ("dflash-mem",),
    "dflash_accept_sample": ("dflash-accept-sample", "dflash-selector"),
    "dflash_accept_greedy": ("dflash-accept-greedy",), "dflash_target": ("dflash-target",),
}

SGLANG_ENV = ("SGLANG_SPEC_TP_SYNC", "SGLANG_ENABLE_PP_SPEC", "SGLANG_PP_LAYER_PARTITION")
VLLM_ENV = ("VLLM_PP_LAYER_PARTITION", "VLLM_USE_V2_MODEL_RUNNER")

# Placeholders export prints for unset checkpoint paths; import reads them back as unset.
MODEL_PLACEHOLDER = "MODEL_PATH"
DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"


def table(engine: str) -> dict[str, Flag]:
    """Every spelling (name and aliases) of the engine's known flags -> its Flag."""
    flags = {"sglang": SGLANG_FLAGS + SGLANG_IGNORED, "vllm": VLLM_FLAGS + VLLM_IGNORED}[engine]
    out: dict[str, Flag] = {}
    for f in flags:
        for spelling in (f.name, *f.aliases):
            out[spelling] = f
    return out
