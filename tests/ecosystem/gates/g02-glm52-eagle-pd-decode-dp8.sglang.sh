# source: https://github.com/sgl-project/sglang/issues/32527 (EAGLE + DP-attention + PD decode deadlock at warm-up: idle and busy DP ranks took different draft graph-or-eager paths when index_share_for_mtp_iteration is set)
# fix: https://github.com/sgl-project/sglang/pull/32196 (graph eligibility min-reduced across DP ranks); SGLang 0.5.23 carries the DSA-seed readiness in the draft graph bit the scheduler gathers over tp (dp_attn.py _spec_input_cuda_graph_compatible)
# gate: eagle_draft_graph
# expect: clean
python -m sglang.launch_server --model-path zai-org/GLM-5.2-FP8 --trust-remote-code --tp 8 --dp-size 8 --enable-dp-attention --disaggregation-mode decode --speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4
