vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 8 --trust-remote-code --speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": 1}'
