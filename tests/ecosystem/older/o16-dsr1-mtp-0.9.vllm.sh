# source: https://github.com/vllm-project/vllm/pull/18435 (V1 DeepSeek MTP, vLLM 0.9.0.1, a comment)
# expect: imported: vLLM 0.33.0
vllm serve /ssd0/model/DeepSeek-R1 \
    --port=8000 --max-model-len=8192 \
    --max-num-batched-tokens=16384 \
    --gpu_memory_utilization 0.9 \
    --tensor-parallel-size 8 \
    --enable-chunked-prefill \
    --enable-prefix-caching \
    --trust-remote-code \
    --served-model-name deepseek-r1 \
    --speculative-config='{"method": "deepseek_mtp", "num_speculative_tokens": 1}'
