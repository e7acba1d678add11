vllm serve meta-llama/Llama-3.1-8B-Instruct --compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}' --max-num-seqs 128 --gpu-memory-utilization 0.9 --kv-cache-dtype fp8
