# source: https://github.com/sgl-project/sglang/pull/13208 (prefill, Ascend NPU)
# expect: refused: the launch line does not give the model's shape
# engine: SGLang 0.5.5 starts it on Ascend NPUs once the operator sets MODEL_PATH (--device npu; the ascend transfer backend, which specplan now plans); the source never sets it, and the model's shape decides the plan: specplan cannot plan it
python -m sglang.launch_server --model-path ${MODEL_PATH}  --disaggregation-mode prefill --host ${P_IP[$i]} \
--port 8000 --disaggregation-bootstrap-port $((8998+$i)) --trust-remote-code --nnodes 1 --node-rank 0 \
--tp-size 16 --mem-fraction-static 0.6 --attention-backend ascend --device npu --quantization w8a8_int8 \
--disaggregation-transfer-backend ascend --max-running-requests 8 --context-length 8192  --disable-radix-cache \
--chunked-prefill-size 32768 --max-prefill-tokens 28680 --disable-overlap-schedule --moe-a2a-backend deepep --deepep-mode normal \
--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4  \
--dp-size 2 --enable-dp-attention --disable-shared-experts-fusion --dtype bfloat16
