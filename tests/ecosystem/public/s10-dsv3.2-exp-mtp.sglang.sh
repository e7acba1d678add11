# source: https://github.com/sgl-project/sglang/pull/11109 (MTP for DeepSeek-V3.2)
# expect: imported: SGLang 0.5.23
python -m sglang.launch_server --model deepseek-ai/DeepSeek-V3.2-Exp --tp 8 --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --disable-cuda-graph
