# source: https://github.com/vllm-project/vllm/issues/44185 (MTP with a MoE draft under DP + EP hangs near max_model_len: one DP rank skips the drafter, input_fits_in_drafter False, while the others enter its MoE collectives)
# fix: https://github.com/vllm-project/vllm/pull/40589 (a rank that skips proposing runs drafter.dummy_run, as its DP peers' collectives need); vLLM 0.33.0's default model runner (v1/worker/gpu/model_runner.py) votes the skip over dp in sync_cudagraph_and_dp_padding (DPSyncState.skip_drafts)
# gate: skip_drafts
# expect: clean
vllm serve /home/weight/Qwen3.5-35B-A3B/ --max-model-len 2048 --max-num-batched-tokens 256 --trust-remote-code --enable-expert-parallel --data-parallel-size 2 --speculative_config '{"method":"mtp", "num_speculative_tokens":3}' --enforce-eager
