# source: https://github.com/sgl-project/sglang/issues/3812 (TP16 on 2 * 8 * H800, node 1)
# expect: imported: SGLang 0.5.23
python -m sglang.launch_server \
    --model-path /dsv3_fp8_weight \
    --dist-init-addr x.x.x.x:5000 \
    --nnodes 2 \
    --node-rank 0 \
    --tp 16 \
    --trust-remote-code
