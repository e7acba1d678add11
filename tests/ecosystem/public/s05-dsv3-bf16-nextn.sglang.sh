# source: https://github.com/sgl-project/sglang/pull/3582 (NextN for DeepSeek-V3/R1, a user comment)
# expect: imported: SGLang 0.5.23
# modern: python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3-bf16 --speculative-algo NEXTN --speculative-draft-model-path /path/to/DeepSeek-V3-NextN-bf16 --speculative-num-steps 2 --speculative-eagle-topk 4 --speculative-num-draft-tokens 4 --disable-radix --tp 8
python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3-bf16 --speculative-algo NEXTN --speculative-draft /path/to/DeepSeek-V3-NextN-bf16 --speculative-num-steps 2 --speculative-eagle-topk 4 --speculative-num-draft-tokens 4 --disable-radix --tp 8
