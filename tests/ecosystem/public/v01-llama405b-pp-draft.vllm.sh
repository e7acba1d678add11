# source: https://github.com/vllm-project/vllm/issues/7456 (the "$ " prompt left out)
# expect: imported: vLLM 0.33.0
# modern: vllm serve /models/Meta-Llama-3.1-405B-Instruct -tp 8 -pp 2 --speculative-config '{"model": "/models/Meta-Llama-3.1-8B-Instruct", "num_speculative_tokens": 5}'
vllm serve /models/Meta-Llama-3.1-405B-Instruct -tp 8 -pp 2 --speculative-model /models/Meta-Llama-3.1-8B-Instruct --use-v2-block-manager --num-speculative-tokens 5
