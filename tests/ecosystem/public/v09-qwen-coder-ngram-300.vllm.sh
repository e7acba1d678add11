# source: https://github.com/vllm-project/vllm/issues/16883 (ngram with VLLM_USE_V1, "use v0")
# expect: imported: vLLM 0.33.0
# engine: vLLM 0.8.x-0.11.0 start it: ModelConfig.__post_init__ moves --rope-scaling into hf_overrides ({"rope_scaling": ...}, "Please instead use `--hf-overrides`"); 0.12.0 has no --rope-scaling
# note: `--rope-scaling` is `--hf-overrides` key `rope_scaling` since 0.12.0 (vLLM 0.11.0's ModelConfig.__post_init__ puts it there itself)
# note: --hf-overrides rope_scaling: no rope_theta or partial_rotary_factor in the model's config at hand to keep
# modern: vllm serve /data/code/Qwen2.5-Coder-32B-Instruct --host 0.0.0.0 --port 8080 --trust-remote-code --gpu-memory-utilization 0.9 --dtype auto --tensor-parallel-size 4 --max-num-batched-tokens 131072 --max-model-len 131072 --max-num-seqs 8 --enable-prefix-caching --speculative-config '{"method": "ngram", "prompt_lookup_min": 10, "prompt_lookup_max": 50, "num_speculative_tokens": 300}' --enforce-eager --hf-overrides '{"rope_scaling": {"factor": 4.0, "original_max_position_embeddings": 32768, "rope_type": "yarn"}}'
export VLLM_ALLOW_LONG_MAX_MODEL_LEN=1
vllm serve /data/code/Qwen2.5-Coder-32B-Instruct \
  --host 0.0.0.0 \
  --port 8080 \
  --trust-remote-code \
  --gpu-memory-utilization 0.9 \
  --dtype auto \
  --tensor-parallel-size 4 \
  --max-num-batched-tokens 131072 \
  --max-model-len 131072 \
  --max-num-seqs 8 \
  --enable-prefix-caching \
  --speculative-config '{"method": "ngram", "prompt_lookup_min": 10, "prompt_lookup_max": 50, "num_speculative_tokens": 300}' \
  --rope-scaling '{ "factor": 4.0, "original_max_position_embeddings": 32768, "rope_type": "yarn" }' \
  --enforce-eager
