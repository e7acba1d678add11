# source: https://github.com/sgl-project/sglang/pull/3500 (EAGLE on the Triton backend, Feb 2025)
# expect: imported: SGLang 0.5.23
# note: written for SGLang <= 0.4.10: `--speculative-draft` is `--speculative-draft-model-path` since 0.5.2
# modern: python3 -m sglang.launch_server --model meta-llama/Llama-2-7b-chat-hf --speculative-algo EAGLE --speculative-draft-model-path lmzheng/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.8 --port 33333 --disable-radix --attention-backend triton
python3 -m sglang.launch_server --model meta-llama/Llama-2-7b-chat-hf  --speculative-algo EAGLE --speculative-draft lmzheng/sglang-EAGLE-llama2-chat-7B --speculative-num-steps 5 --speculative-eagle-topk 8 --speculative-num-draft-tokens 64 --mem-fraction 0.8 --port 33333 --disable-radix --attention-backend triton
