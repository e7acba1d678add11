# source: https://github.com/sgl-project/sglang/issues/3371 (--enable-ep-moe on two nodes, Feb 2025)
# expect: imported: SGLang 0.5.23
# note: `--enable-ep-moe` is `--ep-size 16` since 0.5.5
# modern: python3 -m sglang.launch_server --model-path /root/.cache/huggingface/models/DeepSeek-R1 --tp 16 --dist-init-addr ip:20000 --nnodes 2 --node-rank 0 --trust-remote-code --host 0.0.0.0 --port 40000 --ep-size 16
python3 -m sglang.launch_server --model-path /root/.cache/huggingface/models/DeepSeek-R1 --tp 16 --dist-init-addr ip:20000 --nnodes 2 --node-rank 0 --trust-remote-code --host 0.0.0.0 --port 40000 --enable-ep-moe
