python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --pp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr 10.0.0.1:5000 --trust-remote-code
