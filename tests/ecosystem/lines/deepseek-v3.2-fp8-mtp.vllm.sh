vllm serve deepseek-ai/DeepSeek-V3.2 -tp 8 --quantization fp8 --speculative-config '{"method":"mtp","num_speculative_tokens":3}' --max-model-len 65536
