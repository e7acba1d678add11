# source: https://github.com/sgl-project/sglang/pull/5190 (DeepEP mode, Apr 2025)
# expect: imported: SGLang 0.5.23
# note: `--enable-flashmla` is `--attention-backend flashmla` since 0.4.8
# modern: python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --trust-remote-code --tp 16 --dp 16 --enable-dp-attention --moe-a2a-backend deepep --deepep-mode normal --disable-cuda-graph --attention-backend flashmla --disable-radix-cache --decode-log-interval 1 --host 0.0.0.0 --port 20000 --nnodes 2 --dist-init-addr 10.10.38.10:23456 --chunked-prefill-size 16384 --node-rank 0
python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --trust-remote-code --tp 16 --dp 16 --enable-dp-attention --enable-deepep-moe --deepep-mode normal --disable-cuda-graph --enable-flashmla --disable-radix-cache --decode-log-interval 1 --host 0.0.0.0 --port 20000 --nnodes 2 --dist-init-addr 10.10.38.10:23456 --chunked-prefill-size 16384 --node-rank 0
