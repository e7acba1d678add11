# source: https://github.com/sgl-project/sglang/issues/10001 (Node 0, decode)
# expect: refused: the launch line does not give the model's shape
# engine: SGLang 0.5.x starts it (the issue: "Deployment can be successful"; the script assigns MODE="decode", BACKEND="mooncake" above the line, given here as # env:); ${MODEL} is assigned nowhere in the source, so no model's shape: specplan cannot plan it (give --model-config)
# env: MODE=decode
# env: BACKEND=mooncake
nohup python -m sglang.launch_server \
    --model-path ${MODEL} \
    --disaggregation-mode ${MODE} \
    --disaggregation-transfer-backend ${BACKEND} \
    --disaggregation-ib-device ${IB_DEVICES} \
    --host 0.0.0.0 \
    --port 50000 \
    --dist-init-addr ${DECODE_MASTER_IP}:5000 \
    --nnodes 2 \
    --node-rank 0 \
    --base-gpu-id 4 \
    --tp 8 \
    --quantization moe_wna16 \
    --mem-fraction-static 0.6 \
    --max-running-requests 256 \
    --trust-remote-code \
    > decode.log 2>&1 &
