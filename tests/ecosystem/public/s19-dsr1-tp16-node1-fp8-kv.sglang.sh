# source: https://github.com/sgl-project/sglang/issues/3283 (2 nodes of 8 x H100, lmsysorg/sglang:v0.4.2.post1-cu125; the second node)
# expect: imported: SGLang 0.5.23
python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-R1 --tp 16 --dist-init-addr 172.16.1.68:5000 --nnodes 2 --node-rank 1 --trust-remote-code --quantization fp8 --kv-cache-dtype fp8_e5m2
