# source: https://github.com/sgl-project/sglang/issues/11848 (decode nodes, EPLB)
# expect: refused: '${mode}' in --disaggregation-mode
# engine: SGLang 0.5.x starts it once its caller sets mode, num_nodes and the rest (the script is a function body; ServerArgs.check_server_args asks tp_size * pp_size % nnodes == 0 of it); the source never gives ${mode} or ${num_nodes}, which decide the plan (disaggregation.role, topology.nodes, and $((num_nodes*8)) the widths): specplan cannot plan it
    python3 -m sglang.launch_server \
      --model-path "${model_path}" \
      --disaggregation-mode "${mode}" \
      --dist-init-addr "${dist_init_addr}" \
      --nnodes "${num_nodes}" \
      --node-rank "${node_rank}" \
      --tp-size $((num_nodes*8)) \
      --ep-size $((num_nodes*8)) \
      --dp-size $((num_nodes*8)) \
      --enable-dp-attention \
      --enable-dp-lm-head \
      --decode-log-interval 1 \
      --page-size 1 \
      --host "${node_ip}" \
      --port "${PORT_2}" \
      --disaggregation-bootstrap-port "${bootstrap_port}" \
      --trust-remote-code \
      --moe-dense-tp-size 1 \
      --moe-a2a-backend none \
      --load-balance-method round_robin \
      --disable-radix-cache \
      --watchdog-timeout 1000000 \
      --mem-fraction-static 0.85 \
      --chunked-prefill-size $((num_nodes*131072)) \
      --max-running-requests $((num_nodes*2048)) \
      --max-total-tokens 131072 \
      --context-length 8192 \
      --enable-two-batch-overlap \
      --enable-eplb \
      --ep-num-redundant-experts 32 \
      --eplb-rebalance-num-iterations 1000 \
      --ep-dispatch-algorithm dynamic \
      --eplb-algorithm deepseek &
