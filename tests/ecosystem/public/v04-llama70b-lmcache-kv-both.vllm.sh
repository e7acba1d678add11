# source: https://github.com/vllm-project/vllm/pull/15960 (KV Connector API V1, a user comment)
# expect: refused: kv_connector 'LMCacheConnector' is not a connector vLLM registers
python3 -m vllm.entrypoints.openai.api_server --model  /extended/downloaded/Meta-Llama-3.1-70B-Instruct-quantized.w8a8/ --kv-transfer-config '{"kv_connector":"LMCacheConnector", "kv_role":"kv_both"}' --max-model-len 4096 --gpu-memory-utilization 0.9
