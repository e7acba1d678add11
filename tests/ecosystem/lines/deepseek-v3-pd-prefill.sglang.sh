python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --disaggregation-mode prefill --disaggregation-transfer-backend mooncake --tp 8 --trust-remote-code --host 0.0.0.0 --port 30000
