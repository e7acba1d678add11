# source: https://github.com/vllm-project/vllm/pull/16020 (kv_producer role)
# expect: refused: --kv-transfer-config kv_connector 'MooncakeStoreConnector': specplan plans
# engine: vLLM 0.8.4 starts it on the V0 engine (EngineArgs._is_v1_supported_oracle falls back to V0 for any --kv-transfer-config; KVConnectorFactory registers MooncakeStoreConnector, a KVConnectorBase over Mooncake's distributed store); specplan plans the P/D transfer connectors Nixl* and MooncakeConnector only, not a KV store: it cannot plan it
CUDA_VISIBLE_DEVICES=1 \
LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH \
MOONCAKE_CONFIG_PATH=./mooncake.json \
vllm serve deepseek-ai/DeepSeek-V2-Lite \
		--port 8100 \
		--trust-remote-code \
		--max-model-len 10000 \
		--gpu-memory-utilization 0.8 \
		--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector", "kv_role":"kv_producer", "kv_rank":0, "kv_parallel_size":2}'
