# source: https://github.com/vllm-project/vllm/issues/33497 (DeepSeek-V3.2 MTP on vLLM 0.15.0)
# expect: imported: vLLM 0.33.0
vllm serve deepseek-ai/DeepSeek-V3.2 \
    --tensor-parallel-size 8 \
    --tokenizer-mode deepseek_v32 \
    --tool-call-parser deepseek_v32 \
    --enable-auto-tool-choice \
    --reasoning-parser deepseek_v3 \
    --speculative_config '{"num_speculative_tokens":1, "method":"deepseek_mtp"}'
