# source: https://github.com/vllm-project/vllm/pull/16020 (kv_producer role)
# expect: imported: vLLM 0.33.0
# note: kv_connector MooncakeStoreConnector moves the KV through a shared store
CUDA_VISIBLE_DEVICES=1 \
LD_LIBRARY_PATH=/usr/local/lib/:$LD_LIBRARY_PATH \
MOONCAKE_CONFIG_PATH=./mooncake.json \
vllm serve deepseek-ai/DeepSeek-V2-Lite \
		--port 8100 \
		--trust-remote-code \
		--max-model-len 10000 \
		--gpu-memory-utilization 0.8 \
		--kv-transfer-config '{"kv_connector":"MooncakeStoreConnector", "kv_role":"kv_producer", "kv_rank":0, "kv_parallel_size":2}'
