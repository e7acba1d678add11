# source: https://github.com/sgl-project/sglang/pull/8664 (docs/backend/pd_disaggregation.md, decode 0; the "$ " prompt left out)
# expect: imported: SGLang 0.5.23
# note: topology.device npu: the ascend transfer backend runs on Ascend NPUs only
python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3-0324 --disaggregation-transfer-backend ascend --disaggregation-mode decode --host ${local_ip} --port 30001 --trust-remote-code --dist-init-addr ${decode_master_ip}:5000 --nnodes 1 --node-rank 0 --tp-size 16
