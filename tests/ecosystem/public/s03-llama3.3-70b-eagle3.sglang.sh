# source: https://github.com/sgl-project/sglang/pull/4716 (Fix EAGLE3 for llama3.3 70b)
# expect: imported: SGLang 0.5.23
# modern: python3 -m sglang.launch_server --model meta-llama/Llama-3.3-70B-Instruct --speculative-algo EAGLE3 --speculative-draft-model-path /sgl-workspace/EAGLE3-LLaMA3.3-Instruct-70B --speculative-num-steps 8 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --cuda-graph-max-bs-decode 1 --dtype float16 --port 30000 --tp 8
python3 -m sglang.launch_server --model meta-llama/Llama-3.3-70B-Instruct --speculative-algo EAGLE3 \
    --speculative-draft /sgl-workspace/EAGLE3-LLaMA3.3-Instruct-70B --speculative-num-steps 8 \
    --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 \
    --cuda-graph-max-bs 1 --dtype float16 --port 30000 --tp 8
