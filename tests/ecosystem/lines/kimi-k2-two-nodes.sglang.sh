python3 -m sglang.launch_server --model-path moonshotai/Kimi-K2-Instruct --tp 16 --dist-init-addr 10.0.0.1:50000 --nnodes 2 --node-rank 0 --trust-remote-code --tool-call-parser kimi_k2
