vllm serve Qwen/Qwen3-32B --tensor_parallel_size 4 --speculative-config.method eagle3 --speculative-config.model Tengyunw/qwen3_32b_eagle3 --speculative-config.num_speculative_tokens 3 -O3
