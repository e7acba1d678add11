# source: https://github.com/vllm-project/vllm/pull/15173 (speculative decoding with pipeline parallelism, sample command)
# expect: refused: unknown --speculative-config key 'draft_pipeline_parallel_size'
vllm serve unsloth/llama-3-8b-Instruct \
    --tensor-parallel-size 2 \
    --pipeline-parallel-size 2 \
    --speculative_config '{"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1, "draft_pipeline_parallel_size": 1}' \
    --gpu-memory-utilization 0.85
