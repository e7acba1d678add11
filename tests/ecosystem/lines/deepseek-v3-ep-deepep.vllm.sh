vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dp 2 --enable-expert-parallel --all2all-backend deepep_low_latency --enable-eplb --trust-remote-code
