vllm serve meta-llama/Meta-Llama-3-8B-Instruct --speculative-config '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}'
