# source: https://github.com/vllm-project/vllm/issues/54011 (DSpark adaptive verification on TP8 hangs while the batch drains: each TP rank trims the verify budget from its own confidence copy)
# fix: https://github.com/vllm-project/vllm/pull/56831 (rank 0's budget and partial-allocation capacities broadcast over TP): the plan `specplan enforce` writes agrees the budget over tp
# gate: adaptive_verify_budget
# expect: ERROR
vllm serve /datasets/deepseek-v4-flash-0731/ --tokenizer-mode deepseek_v4 --trust-remote-code --tensor-parallel-size 8 --enable-expert-parallel --kv-cache-dtype fp8 --max-model-len 16384 --max-num-seqs 256 --max-num-batched-tokens 16384 --gpu-memory-utilization 0.8 --compilation-config '{"max_cudagraph_capture_size":4096}' --speculative-config '{"method":"dspark","attention_backend":"FLASH_ATTN","num_speculative_tokens":7,"draft_sample_method":"probabilistic","enable_adaptive_verification":true}'
