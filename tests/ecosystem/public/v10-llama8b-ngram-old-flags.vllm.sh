# source: https://github.com/vllm-project/vllm/issues/9400 (a user comment)
# expect: imported: vLLM 0.33.0
# modern: CUDA_VISIBLE_DEVICES=7 python -m vllm.entrypoints.openai.api_server --model /mnt/nvme0n1/ckpt/llama/Meta-Llama-3.1-8B-Instruct --trust-remote-code -tp 1 --seed 42 --chat-template ./examples/template_chatml.jinja --host 0.0.0.0 --port 9001 --speculative-config '{"model": "[ngram]", "num_speculative_tokens": 5, "prompt_lookup_max": 4}'
CUDA_VISIBLE_DEVICES=7 python -m vllm.entrypoints.openai.api_server --model /mnt/nvme0n1/ckpt/llama/Meta-Llama-3.1-8B-Instruct --trust-remote-code -tp 1 --speculative_model [ngram] --num_speculative_tokens 5 --ngram_prompt_lookup_max 4 --seed 42 --use-v2-block-manager --chat-template ./examples/template_chatml.jinja --host 0.0.0.0 --port 9001
