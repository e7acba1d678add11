# source: https://github.com/southfreebird/vllm/blob/main/run_vllm.sh (a launch script of a vLLM fork, 2025)
# expect: refused: written for vLLM <= 0.11.0: --speculative-config key `disable_logprobs` was retired in 0.12.0 (vLLM 0.8.5 to 0.11.0 had it)
# engine: vLLM 0.8.5-0.9.2 start it (SpeculativeConfig has disable_logprobs, disable_log_stats, disable_by_batch_size; EngineArgs._is_v1_supported_oracle falls back to V0, whose MLPSpeculatorWorker runs mlp_speculator); disable_logprobs is no SpeculativeConfig field of vLLM 0.30.0-0.33.0, and mlp_speculator is a method specplan does not plan (vLLM 0.33.0 SpeculativeMethod no longer has it): specplan cannot plan it
vllm serve meta-llama/Meta-Llama-3.1-8B-Instruct \
          --served-model-name meta-llama/Meta-Llama-3.1-8B-Instruct-fast \
          --trust-remote-code \
          --disable-log-requests \
          --tensor-parallel-size 2 \
          --gpu-memory-utilization 0.97 \
          --enable-auto-tool-choice \
          --tool-call-parser llama3_json \
          --speculative-config '{"model": "./from_llama_v3.1_8b_instruct/mlp_based_lk/", "num_speculative_tokens": 3, "disable_logprobs": false, "disable_log_stats": false, "disable_by_batch_size": 30, "method": "mlp_speculator"}'
