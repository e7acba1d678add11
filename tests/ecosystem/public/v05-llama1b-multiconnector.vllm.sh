# source: https://github.com/neuralmagic/vllm/pull/61 (multiple KV connectors, review comment)
# expect: refused: kv_connector 'SharedStorageConnector' is not a connector vLLM registers
vllm serve meta-llama/Llama-3.2-1B-Instruct \
    --port 8100 \
    --enforce-eager \
    --disable-log-requests \
    --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"SharedStorageConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"local_storage"}}]}}'
