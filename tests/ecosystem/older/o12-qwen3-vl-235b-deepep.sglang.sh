# source: https://github.com/sgl-project/sglang/issues/11088 (Qwen3-VL with DeepEP, Sep 2025)
# expect: imported: SGLang 0.5.23
python -m sglang.launch_server \
  --model-path /models/Qwen/Qwen3-VL-235B-A22B-Instruct \
  --dp-size 1 \
  --tp-size 4 \
  --port 30000 \
  --trust-remote-code \
  --moe-a2a-backend deepep
