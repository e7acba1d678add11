# source: https://github.com/neuralmagic/vllm/pull/61 (multiple KV connectors, review comment)
# expect: imported: vLLM 0.33.0
# engine: vLLM 0.9.2-0.12.0 start it (KVConnectorFactory registers MultiConnector, NixlConnector and SharedStorageConnector); 0.13.0 registers the same module as ExampleConnector
# note: kv_connector `SharedStorageConnector` is `ExampleConnector` since 0.13.0 (the same connector
# modern: vllm serve meta-llama/Llama-3.2-1B-Instruct --port 8100 --enforce-eager --disable-log-requests --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"ExampleConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"local_storage"}}]}}'
vllm serve meta-llama/Llama-3.2-1B-Instruct \
    --port 8100 \
    --enforce-eager \
    --disable-log-requests \
    --kv-transfer-config '{"kv_connector":"MultiConnector","kv_role":"kv_both","kv_connector_extra_config":{"connectors":[{"kv_connector":"NixlConnector","kv_role":"kv_both"},{"kv_connector":"SharedStorageConnector","kv_role":"kv_both","kv_connector_extra_config":{"shared_storage_path":"local_storage"}}]}}'
