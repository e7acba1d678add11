vllm serve Qwen/Qwen3-32B --port 8100 --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' -tp 2
