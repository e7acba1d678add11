# source: https://github.com/sgl-project/sglang/issues/3362 (SGLang EAGLE, Feb 2025)
# expect: refused: num_draft_tokens=64 must be in 2 .. 1 + topk*num_steps = 41
CUDA_VISIBLE_DEVICES=0,1,3,7 python -m sglang.launch_server --model /mnt/nvme0n1/ckpt/llama/Meta-Llama-3.1-70B-Instruct --port 9001 --host 0.0.0.0 --tensor-parallel-size 4 --speculative-algo EAGLE --speculative-draft /mnt/nvme0n1/ckpt/llama/sglang-EAGLE-LLaMA3-Instruct-70B --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.7 --disable-cuda-graph
