# source: https://github.com/sgl-project/sglang/issues/10001 (Node 0, decode)
# expect: refused: '${MODE}' in --disaggregation-mode
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
