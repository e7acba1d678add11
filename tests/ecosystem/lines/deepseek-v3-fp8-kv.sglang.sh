python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --kv-cache-dtype fp8_e4m3 --quantization fp8 --trust-remote-code
