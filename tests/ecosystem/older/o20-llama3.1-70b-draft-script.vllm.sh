# source: https://github.com/tanishqkumar/ssd/blob/main/bench/launch_vllm_server.sh (a benchmark's launch script, 2025)
# expect: imported: vLLM 0.33.0
#!/bin/bash
# (the two lines that activated a conda environment before the launch, `source .../conda.sh` and `conda activate vllm`, left out)
# launch_vllm_server.sh — Launch vLLM server with spec decode for benchmarking
# Run on a compute node (RS-06 or RS-20)

MODEL=/data/shared/huggingface/hub/models--meta-llama--Llama-3.1-70B-Instruct/snapshots/1605565b47bb9346c5515c34102e054115b4f98b
DRAFT=/data/shared/huggingface/hub/models--meta-llama--Llama-3.2-1B-Instruct/snapshots/9213176726f574b556790deb65791e0c5aa438b6

VLLM_USE_V1=0 python3 -m vllm.entrypoints.openai.api_server \
    --model $MODEL \
    --speculative-config "{\"method\": \"draft_model\", \"model\": \"$DRAFT\", \"num_speculative_tokens\": 5}" \
    --tensor-parallel-size 4 \
    --gpu-memory-utilization 0.7 \
    --max-num-seqs 1 \
    --disable-log-requests \
    --trust-remote-code \
    --port 40020
