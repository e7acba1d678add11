# source: https://github.com/sgl-project/sglang/issues/2585 (SGLang v0.4.1 release note)
# expect: imported: SGLang 0.5.23
python3 -m sglang.launch_server --model deepseek-ai/DeepSeek-V3-Base --enable-dp-attention --tp 8 --trust-remote-code
