"""One greedy generation on vLLM, token ids in and out (the tiny models have no tokenizer):
    python generate.py MODELS OUT.json
writes the token ids of two prompts, 8 tokens each, to OUT.json. The engine: the tiny target
(MODELS/target) on 2 tensor-parallel ranks with its draft model (MODELS/draft), 3 speculative
tokens, as tiny.yaml describes it. Whether specplan's plugin runs is the environment's
SPECPLAN_PLAN, as for an operator: set, vLLM loads it through the plugin's entry point.
"""

import json
import sys

from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

PROMPTS = [[1, 17, 300, 42, 99], [1, 5, 6, 7]]


def main(models: str, out: str) -> None:
    llm = LLM(model=f"{models}/target", tensor_parallel_size=2, distributed_executor_backend="mp",
              speculative_config={"method": "draft_model", "model": f"{models}/draft",
                                  "num_speculative_tokens": 3},
              skip_tokenizer_init=True, enforce_eager=True, dtype="float32", max_model_len=128,
              max_num_seqs=4, seed=0)
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, detokenize=False)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in PROMPTS], params, use_tqdm=False)
    with open(out, "w") as fh:
        json.dump([list(o.outputs[0].token_ids) for o in outputs], fh)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
