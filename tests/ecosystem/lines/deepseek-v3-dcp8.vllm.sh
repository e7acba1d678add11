vllm serve deepseek-ai/DeepSeek-V3 -tp 8 -dcp 8 --trust-remote-code
