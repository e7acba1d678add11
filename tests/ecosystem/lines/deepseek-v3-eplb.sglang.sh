python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 --ep 8 --enable-eplb --eplb-rebalance-num-iterations 1000 --trust-remote-code
