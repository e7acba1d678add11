# source: https://github.com/vllm-project/vllm/pull/24049 (spec decoding metrics in DP mode, test plan)
# expect: imported: vLLM 0.33.0
vllm serve /home/models/Qwen3-0.6B --speculative_config '{"model": "/home/models/Qwen3-0.6B", "num_speculative_tokens": 5, "prompt_lookup_min": 2, "prompt_lookup_max": 5, "method": "ngram"}' --enforce-eager -dp 8
