vllm serve moonshotai/Kimi-K2-Instruct --trust-remote-code --tensor-parallel-size 16 --enable-auto-tool-choice --tool-call-parser kimi_k2 --nnodes 2
