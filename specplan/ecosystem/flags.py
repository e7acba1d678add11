"""The engines' launch options specplan plans, reads and writes, as data.

Every option each engine's parser accepts is in specplan/engines/<engine>/flags/*.json (generated from
the real parsers by tools/engine_flags.py); this module says which of them specplan plans and
into which spec key (MODELLED), and how it spells what it writes. Every name below was read
from the released wheels (`pip download --no-deps`), never guessed:

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

# Which of the engine's arguments specplan plans: argparse dest -> the spec key it lands in.
# Every other argument the engine's parser accepts (specplan/engines/<engine>/flags/*.json) is kept
# verbatim in `engine_args:` and re-emitted by export ("kept, not planned").
SGLANG_MODELLED: dict[str, str] = {
    "model_path": "model.path", "tp_size": "topology.tp", "pp_size": "topology.pp",
    "dp_size": "topology.dp", "attn_dp_size": "topology.dp",
    "enable_dp_attention": "topology.dp_attention", "attn_cp_size": "topology.cp",
    "dcp_size": "topology.dcp", "ep_size": "topology.ep", "moe_dp_size": "topology.moe_dp",
    "nnodes": "topology.nodes", "device": "topology.device",
    "enable_dp_lm_head": "topology.dp_lm_head", "dtype": "model.dtype",
    "quantization": "model.dtype", "kv_cache_dtype": "model.kv_cache_dtype",
    "moe_a2a_backend": "model.moe.a2a", "enable_eplb": "model.moe.eplb",
    "speculative_algorithm": "speculative.method", "speculative_num_steps": "speculative.num_steps",
    "speculative_eagle_topk": "speculative.topk",
    "speculative_num_draft_tokens": "speculative.num_draft_tokens",
    "speculative_dspark_block_size": "speculative.num_steps",
    "speculative_dflash_block_size": "speculative.num_steps",
    "speculative_draft_model_path": "speculative.draft_path",
    "disable_overlap_schedule": "runtime.async_scheduling",
    "cuda_graph_max_bs_decode": "runtime.max_batch",
    "page_size": "model.page_size",
    "disaggregation_mode": "disaggregation.role",
    "disaggregation_transfer_backend": "disaggregation.connector",
    "config": "(its options are read as if on the line)",
}
VLLM_MODELLED: dict[str, str] = {
    "model_tag": "model.path", "model": "model.path", "tensor_parallel_size": "topology.tp",
    "pipeline_parallel_size": "topology.pp", "data_parallel_size": "topology.dp",
    "prefill_context_parallel_size": "topology.cp",
    "decode_context_parallel_size": "topology.dcp", "enable_expert_parallel": "topology.ep",
    "nnodes": "topology.nodes", "data_parallel_size_local": "topology.nodes",
    "dtype": "model.dtype", "quantization": "model.dtype", "kv_cache_dtype": "model.kv_cache_dtype",
    "all2all_backend": "model.moe.a2a", "enable_eplb": "model.moe.eplb",
    "speculative_config": "speculative", "async_scheduling": "runtime.async_scheduling",
    "kv_transfer_config": "disaggregation", "block_size": "model.page_size",
    "config": "(its options are read as if on the line)",
}
MODELLED = {"sglang": SGLANG_MODELLED, "vllm": VLLM_MODELLED}

# --quantization values whose activations (and so taps and stage payloads) are FP8.
FP8_QUANTIZATION = frozenset({"fp8", "w8a8_fp8", "modelopt_fp8", "fbgemm_fp8", "fp8_e4m3"})
# --kv-cache-dtype spellings -> model.kv_cache_dtype (vLLM's "fp8" is e4m3).
KV_CACHE_DTYPES = {"auto": "auto", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16",
                   "float16": "fp16", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
                   "fp8_e5m2": "fp8_e5m2"}
# MoE all-to-all backends that dispatch as DeepEP does (SGLang --moe-a2a-backend, vLLM
# --all2all-backend); "none" / allgather_reducescatter keep MoE collectives tensor parallel.
DEEPEP_BACKENDS = frozenset({"deepep", "deepep_v2", "deepep_high_throughput",
                             "deepep_low_latency"})
NO_A2A_BACKENDS = frozenset({"none", "allgather_reducescatter", "naive"})
# SGLang --moe-a2a-backend values that set ep_size = tp_size (arg_groups/overrides.py
# _a2a_ep_size, _A2A_EP_SPANNING_BACKENDS).
SGLANG_EP_SPANNING_A2A = frozenset({"megamoe", "deepep", "deepep_v2", "mooncake", "nixl",
                                    "ascend_fuseep", "flashinfer", "flashinfer_megamoe", "mori",
                                    "pplx"})

# speculative.method -> SGLang --speculative-algorithm: engines/sglang/convention.py (SGLANG_ALGORITHMS).
# speculative.method -> vLLM speculative_config.method: engines/vllm/convention.py (VLLM_METHODS).
# speculative_config keys import plans; the other SpeculativeConfig fields (flags/vllm.json
# "keys") are kept in the line, not planned.
VLLM_SPEC_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")

# dtype spellings both engines accept for --dtype.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                 "float": "fp32"}

# SGLang's SpecTpSyncSite slugs, presets and the specplan sites they carry:
# engines/sglang/spec_tp_sync.py.

SGLANG_ENV = ("SGLANG_SPEC_TP_SYNC", "SGLANG_ENABLE_PP_SPEC", "SGLANG_PP_LAYER_PARTITION",
              "SGLANG_ZBAL_LOCAL_MEM_SIZE")
VLLM_ENV = ("VLLM_PP_LAYER_PARTITION", "VLLM_USE_V2_MODEL_RUNNER")

# Placeholders export prints for unset checkpoint paths; import reads them back as unset.
MODEL_PLACEHOLDER = "MODEL_PATH"
DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"
