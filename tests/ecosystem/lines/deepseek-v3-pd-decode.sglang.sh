python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --disaggregation-mode decode --tp 8 --dp 8 --enable-dp-attention --trust-remote-code --host 0.0.0.0 --port 30001
