# source: https://github.com/vllm-project/vllm-ascend/issues/3278 (DeepSeek-V3.2-Exp DP2 + TP16, node0)
# expect: imported: vLLM 0.33.0
# note: topology.device npu: --additional-config torchair_graph_config is read only by the
vllm serve /root/.cache/weights/dpsk-bf16 \
--host 0.0.0.0 \
--port 8000 \
--data-parallel-size 2 \
--data-parallel-size-local 1 \
--data-parallel-address $local_ip \
--data-parallel-rpc-port 13389 \
--tensor-parallel-size 16 \
--seed 1024 \
--served-model-name deepseek_v3.2 \
--enable-expert-parallel \
--max-num-seqs 16 \
--max-model-len 4096 \
--max-num-batched-tokens 4096 \
--trust-remote-code \
--no-enable-prefix-caching \
--gpu-memory-utilization 0.9 \
--additional-config '{"torchair_graph_config":{"enabled":true,"graph_batch_sizes":[16]}}'
