# source: https://github.com/vllm-project/vllm/issues/12256 (DeepSeek-R1 at tp 32, a comment, Feb 2025)
# expect: imported: vLLM 0.33.0
# note: `--num-speculative-tokens` is `--speculative-config` key `num_speculative_tokens` since 0.8.5
# note: vLLM 0.7.3's SpeculativeConfig.maybe_create_spec_config took the target itself (model_type 'deepseek_v3') as its MTP draft
# modern: RAY_IGNORE_UNHANDLED_ERRORS=1 NCCL_P2P_LEVEL=NVL NCCL_IB_CUDA_SUPPORT=1 NCCL_NET_GDR_LEVEL=2 NCCL_IB_DISABLE=0 NCCL_IB_HCA=mlx5 NCCL_DEBUG=INFO vllm serve /app/DeepSeek-R1 --served-model-name deepseek-reasoner-1212 --trust-remote-code --host 0.0.0.0 --port 7860 --max-model-len 65536 --gpu-memory-utilization 0.9 --tensor-parallel-size 32 --reasoning-parser deepseek_r1 --max_num_batched_tokens 32768 --enforce-eager --quantization fp8 --max-num-seqs 128 --pipeline-parallel-size 1 --enable-prefix-caching --enable-chunked-prefill --speculative-config '{"method": "mtp", "num_speculative_tokens": 1}'
RAY_IGNORE_UNHANDLED_ERRORS=1 NCCL_P2P_LEVEL=NVL NCCL_IB_CUDA_SUPPORT=1 NCCL_NET_GDR_LEVEL=2 NCCL_IB_DISABLE=0  NCCL_IB_HCA=mlx5 NCCL_DEBUG=INFO vllm serve \
	 /app/DeepSeek-R1 \
	 --served-model-name "deepseek-reasoner-1212" \
	 --trust-remote-code \
	 --host "0.0.0.0" \
	 --port 7860 \
	 --max-model-len 65536 \
	 --gpu-memory-utilization 0.9 \
	 --tensor-parallel-size 32 \
	 --enable-reasoning \
	 --reasoning-parser deepseek_r1 \
	 --max_num_batched_tokens 32768  --enforce-eager  --quantization fp8 \
	 --max-num-seqs 128 --pipeline-parallel-size 1 --enable-prefix-caching --enable-chunked-prefill  --num-speculative-tokens 1
