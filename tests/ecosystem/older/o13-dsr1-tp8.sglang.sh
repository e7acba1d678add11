# source: https://github.com/sgl-project/sglang/pull/3314 (docs: DeepSeek usage, Feb 2025)
# expect: imported: SGLang 0.5.23
python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-R1 --tp 8 --trust-remote-code
