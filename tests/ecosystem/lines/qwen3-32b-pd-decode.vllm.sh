vllm serve Qwen/Qwen3-32B --port 8200 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' -tp 2
