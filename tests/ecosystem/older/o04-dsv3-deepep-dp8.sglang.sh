# source: https://github.com/sgl-project/sglang/pull/4232 (DeepEP integration, a comment, Mar 2025)
# expect: imported: SGLang 0.5.23
# note: written for SGLang <= 0.5.2: `--enable-deepep-moe` is `--moe-a2a-backend deepep` since 0.5.5
# modern: python3 -m sglang.launch_server --model-path /data00/models/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention --moe-a2a-backend deepep --trust-remote-code --port 8010 --context-length 8192 --mem-fraction-static 0.8 --disable-cuda-graph
python3 -m sglang.launch_server --model-path /data00/models/DeepSeek-V3 --tp 8 --dp 8 --enable-dp-attention --enable-deepep-moe --trust-remote-code  --port 8010 --context-length 8192 --mem-fraction-static 0.8 --disable-cuda-graph
