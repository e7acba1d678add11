# source: https://github.com/vllm-project/vllm/pull/35690 (DeepSeek-V3.2 with MTP under -dp 8 -ep crashed in execute_dummy_batch: an idle DP rank's one-token dummy batch missed the FULL_DECODE padding its busy peers used)
# fix: https://github.com/vllm-project/vllm/pull/35376 (the idle rank's dummy run takes the uniform decode length); vLLM 0.33.0's Worker.execute_dummy_batch runs it at uniform_decode_query_len, and engines_running is all-reduced over dp (DPEngineCoreProc._has_global_unfinished_reqs)
# gate: dp_idle_dummy_batch
# expect: clean
vllm serve deepseek-ai/DeepSeek-V3.2 --tokenizer-mode deepseek_v32 -dp 8 -ep --block-size 256 --gpu-memory-utilization 0.8 --max-model-len auto --reasoning-parser deepseek_v3 --no-enable-prefix-caching --kv-cache-dtype fp8 --speculative-config.method deepseek_mtp --speculative-config.num_speculative_tokens 1
