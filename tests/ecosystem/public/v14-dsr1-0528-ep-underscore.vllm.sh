# source: https://github.com/vllm-project/recipes/pull/11 (DeepSeek-V3 recipe, before the correction)
# expect: imported: vLLM 0.33.0
vllm serve deepseek-ai/DeepSeek-R1-0528 \
  --trust-remote-code \
  --tensor-parallel-size 8 \
  --enable_expert_parallel
