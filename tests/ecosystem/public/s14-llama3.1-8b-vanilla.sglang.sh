# source: https://github.com/sgl-project/sglang/pull/13553 (suffix decoding benchmark, the vanilla server)
# expect: imported: SGLang 0.5.23
# modern: python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --port 30000 --mem-fraction-static 0.8 --cuda-graph-max-bs-decode 8
python -m sglang.launch_server \
      --model-path meta-llama/Llama-3.1-8B-Instruct \
      --port 30000 \
      --mem-fraction-static 0.8 \
      --cuda-graph-max-bs 8
