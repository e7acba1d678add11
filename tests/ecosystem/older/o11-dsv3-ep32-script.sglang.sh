# source: https://github.com/uccl-project/uccl/pull/562 (EP=32 DeepEP on SGLang, Nov 2025)
# expect: refused: '$NNODES' in --nnodes
# engine: SGLang 0.5.5 starts it once the script's caller sets NNODES (ServerArgs.check_server_args asks tp_size * pp_size % nnodes == 0 of it); the source never gives NNODES, MODEL_PATH or NODE_RANK, and nnodes decides the plan (topology.nodes): specplan cannot plan it without --env NNODES=...
python -m sglang.launch_server \
  --model-path "$MODEL_PATH" \
  --tp-size 32 \
  --dp-size 32 \
  --ep-size 32 \
  --nnodes "$NNODES" \
  --node-rank "$NODE_RANK" \
  --dist-init-addr "$DIST_ADDR" \
  --trust-remote-code \
  --mem-fraction-static 0.85 \
  --attention-backend flashinfer \
  --enable-eplb \
  --eplb-algorithm deepseek \
  --ep-num-redundant-experts 0 \
  --ep-dispatch-algorithm dynamic \
  --enable-dp-attention \
  --enable-dp-lm-head \
  --page-size 256 \
  --moe-dense-tp-size 1 \
  --chunked-prefill-size 32768 \
  --cuda-graph-bs 256 \
  --moe-a2a-backend deepep \
  --deepep-mode normal \
  --deepep-config "$DEEPEP_CFG"
