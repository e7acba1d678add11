vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4 --async-scheduling --speculative-config '{"method": "qwen3_next_mtp", "num_speculative_tokens": 2}'
