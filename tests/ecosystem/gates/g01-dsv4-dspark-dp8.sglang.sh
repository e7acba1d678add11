# source: https://github.com/sgl-project/sglang/issues/39886 (DSpark start-up hang: SpecTpSync on the one-rank attn_tp group skips the free-memory MIN over the draft's TP-wide graph group)
# fix: https://github.com/sgl-project/sglang/pull/39954 (reduce the memory probe over the capture group): the plan `specplan enforce` writes takes that MIN over tp
# gate: dspark_draft_graph_mem
# expect: ERROR
python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V4-Flash --tp 8 --dp-size 8 --enable-dp-attention --enable-dp-lm-head --speculative-algorithm DSPARK --speculative-dspark-block-size 7
