# source: https://github.com/sgl-project/sglang/pull/8664 (docs/backend/pd_disaggregation.md, prefill 0; the "$ " prompt left out)
# expect: refused: --disaggregation-transfer-backend ascend: specplan plans
# engine: SGLang 0.4.10 starts it on Ascend NPUs (--disaggregation-transfer-backend choices mooncake, nixl, ascend; disaggregation/utils.py TransferBackend.ASCEND, get_kv_class); specplan plans the CUDA transfer backends mooncake and nixl only: it cannot plan it
python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --disaggregation-transfer-backend ascend --disaggregation-mode prefill --host ${local_ip} --port 30000 --trust-remote-code --dist-init-addr ${prefill_master_ip}:5000 --nnodes 1 --node-rank 0 --tp-size 16
