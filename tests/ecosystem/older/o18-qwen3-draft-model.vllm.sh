# source: https://github.com/vllm-project/vllm/pull/24322 (spec decode with draft models, Sep 2025)
# expect: imported: vLLM 0.33.0
vllm serve \
    --model=Qwen/Qwen3-4B \
    --speculative-config '{"model": "Qwen/Qwen3-0.6B", "method": "draft_model", "num_speculative_tokens": 3, "max-model-len": 2000, "disable_padded_drafter_batch": true}' \
    --max-model-len 2000
