# source: https://github.com/sgl-project/sglang/pull/7762 (DeepSeek-R1-W4AFP8 with ep-moe, Jul 2025)
# env: MODEL_PATH=Barrrrry/DeepSeek-R1-W4AFP8
# expect: imported: SGLang 0.5.23
# modern: SGL_ENABLE_JIT_DEEPGEMM=1 python3 -m sglang.launch_server --model-path Barrrrry/DeepSeek-R1-W4AFP8 --context-length 8192 --tp 8 --trust-remote-code --host 0.0.0.0 --port 8000 --mem-fraction-static 0.8 --ep-size 8 --cuda-graph-max-bs-decode 256 --cuda-graph-bs-decode 1 2 4 8 16 32 64 128 256 --max-running-requests 256 --disable-radix-cache
SGL_ENABLE_JIT_DEEPGEMM=1 python3 -m sglang.launch_server --model-path ${MODEL_PATH} --context-length 8192 --tp 8 --trust-remote-code --host 0.0.0.0 --port 8000 --mem-fraction-static 0.8 --enable-ep-moe --cuda-graph-max-bs 256 --cuda-graph-bs 1 2 4 8 16 32 64 128 256 --max-running-requests 256 --disable-radix-cache
