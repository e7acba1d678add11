# source: https://github.com/sgl-project/sglang/pull/3500 (EAGLE on the Triton backend, Feb 2025)
# expect: refused: num_draft_tokens=64 must be in 2 .. 1 + topk*num_steps = 41
python3 -m sglang.launch_server --model meta-llama/Llama-2-7b-chat-hf  --speculative-algo EAGLE --speculative-draft lmzheng/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.8 --port 33333 --disable-radix --attention-backend triton
