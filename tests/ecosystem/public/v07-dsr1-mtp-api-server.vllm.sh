# source: https://github.com/vllm-project/vllm/pull/12755 (DeepSeek MTP spec decode, online serving)
# expect: refused: unknown vllm flag ---trust-remote-code
# engine: vLLM 0.7.3 refuses it: its own parser (make_arg_parser over FlexibleArgumentParser, built from the wheel) exits 2 with "unrecognized arguments: ---trust-remote-code" (the PR's typo; argparse matches no option by the prefix ---)
python -m vllm.entrypoints.openai.api_server --disable-log-requests --gpu-memory-utilization 0.8  --max-model-len 65536 --max-num-seqs 128 --seed 0 --tensor-parallel-size 8 --model deepseek-ai/DeepSeek-R1 ---trust-remote-code --num-speculative-tokens 1
