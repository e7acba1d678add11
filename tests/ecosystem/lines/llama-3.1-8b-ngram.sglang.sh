python3 -m sglang.launch_server --model meta-llama/Llama-3.1-8B-Instruct --speculative-algorithm NGRAM --speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5 --tp 2
