# source: https://github.com/vllm-project/vllm/pull/15960 (KV Connector API V1, a user comment)
# expect: imported: vLLM 0.33.0
# engine: vLLM 0.8.0-0.8.4 start it on the V0 engine (EngineArgs._is_v1_supported_oracle falls back to V0 for any --kv-transfer-config; KVConnectorFactory registers LMCacheConnector, a KVConnectorBase); 0.8.5-0.9.2 need VLLM_USE_V1=0 (create_connector_v1 asserts KVConnectorBase_V1); 0.10.2 registers only LMCacheConnectorV1
# note: kv_connector `LMCacheConnector` is `LMCacheConnectorV1` since 0.10.2
# modern: python3 -m vllm.entrypoints.openai.api_server --model /extended/downloaded/Meta-Llama-3.1-70B-Instruct-quantized.w8a8/ --kv-transfer-config '{"kv_connector":"LMCacheConnectorV1", "kv_role":"kv_both"}' --max-model-len 4096 --gpu-memory-utilization 0.9
python3 -m vllm.entrypoints.openai.api_server --model  /extended/downloaded/Meta-Llama-3.1-70B-Instruct-quantized.w8a8/ --kv-transfer-config '{"kv_connector":"LMCacheConnector", "kv_role":"kv_both"}' --max-model-len 4096 --gpu-memory-utilization 0.9
