# source: https://theneuralbase.com/vllm/learn/advanced/speculative-decoding-configuration/ (a tutorial's launch script)
# expect: imported: vLLM 0.33.0
# note: `--use-v2-block-manager` was retired in 0.10.2 and changed nothing
# modern: vllm serve meta-llama/Llama-3.2-8B-Instruct --gpu-memory-utilization 0.9 --max-num-batched-tokens 4096 --max-num-seqs 64 --port 8000 --host 0.0.0.0 --speculative-config '{"model": "meta-llama/Llama-3.2-1B", "num_speculative_tokens": 5, "max_model_len": 1024}'
vllm serve meta-llama/Llama-3.2-8B-Instruct \
--speculative-model meta-llama/Llama-3.2-1B \
--num-speculative-tokens 5 \
--speculative-max-model-len 1024 \
--use-v2-block-manager \
--gpu-memory-utilization 0.9 \
--max-num-batched-tokens 4096 \
--max-num-seqs 64 \
--port 8000 \
--host 0.0.0.0
