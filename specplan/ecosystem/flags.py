"""The launch-line spellings both engines share, as data.

Every option each engine's parser accepts is in specplan/engines/<engine>/flags/*.json
(generated from the real parsers by tools/engine_flags.py); which of them specplan plans, and
into which spec key, is each engine's launch table (engines/<engine>/launch.py `modelled`,
read from its wheel). This module holds the spellings the readers and writers of both engines
use: dtypes, KV cache dtypes, MoE all-to-all backends, FP8 quantizations, the path placeholders.
Every name below was read from the released wheels (`pip download --no-deps`), never guessed.
"""

from __future__ import annotations

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
# speculative.method -> SGLang --speculative-algorithm: engines/sglang/methods.py (the rows' names).
# speculative.method -> vLLM speculative_config.method: engines/vllm/methods.py (the rows' names).
# The speculative_config keys import plans: engines/vllm/launch.py (SPEC_KEYS).

# dtype spellings both engines accept for --dtype.
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32",
                 "float": "fp32"}

# SGLang's SpecTpSyncSite slugs, presets and the specplan sites they carry:
# engines/sglang/spec_tp_sync.py. The environment variables import reads: each engine's
# launch table (engines/<engine>/launch.py `env`).

# Placeholders export prints for unset checkpoint paths; import reads them back as unset.
MODEL_PLACEHOLDER = "MODEL_PATH"
DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"
