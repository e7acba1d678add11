# source: https://github.com/vllm-project/vllm/pull/15173 (speculative decoding with pipeline parallelism, sample command)
# expect: refused: unknown --speculative-config key 'draft_pipeline_parallel_size'
# engine: no vLLM release starts it: no release's SpeculativeConfig has draft_pipeline_parallel_size (read in 0.6.6, 0.7.3, 0.8.4, 0.8.5, 0.9.2, 0.10.2-0.15.0, 0.25.0, 0.29.0, 0.30.0-0.33.0; the pull requests that proposed it, 15173 and 16568, were closed unmerged), and vLLM 0.8.4/0.8.5 SpeculativeConfig.from_dict is cls(**dict_value): TypeError on the unknown key
vllm serve unsloth/llama-3-8b-Instruct \
    --tensor-parallel-size 2 \
    --pipeline-parallel-size 2 \
    --speculative_config '{"model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 1, "draft_pipeline_parallel_size": 1}' \
    --gpu-memory-utilization 0.85
