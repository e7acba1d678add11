python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp 2 --disable-overlap-schedule --disable-radix-cache --port 30010
