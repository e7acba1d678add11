"""One offline vLLM generation, run by the lane's Python in its own process group:
    python tests/real_engine/run_llm.py '<json>'
The JSON holds `engine` (keyword arguments of vllm.LLM), `prompts` (lists of token ids) and
`max_tokens`. Greedy. Prints one line `RESULT {"tokens": [[...], ...], "accepted": N,
"drafts": N}` (the speculative counters from vLLM's own metrics; 0 without speculation).
With `"serve": true` (benchmarks) the engine then stays up: each `go` line on stdin runs the
generation again and prints `TIMED <seconds>` (exit on `quit` or end of input).
Whether specplan's plugin runs is the caller's environment (SPECPLAN_PLAN), as for an operator.
"""

from __future__ import annotations

import json
import sys
import time


def spec_counts(llm) -> dict:
    counts = {"accepted": 0, "drafts": 0}
    names = {"vllm:spec_decode_num_accepted_tokens": "accepted",
             "vllm:spec_decode_num_draft_tokens": "drafts"}
    for metric in llm.get_metrics():
        key = names.get(metric.name)
        if key is not None and hasattr(metric, "value"):
            counts[key] += int(metric.value)
    return counts


def main(args: dict) -> None:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(**args["engine"])
    params = SamplingParams(temperature=0.0, max_tokens=args["max_tokens"], ignore_eos=True,
                            detokenize=False)
    prompts = [TokensPrompt(prompt_token_ids=p) for p in args["prompts"]]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    tokens = [list(o.outputs[0].token_ids) for o in outputs]
    print("RESULT " + json.dumps({"tokens": tokens, **spec_counts(llm)}), flush=True)
    for line in sys.stdin if args.get("serve") else ():
        if line.strip() != "go":
            break
        t0 = time.perf_counter()
        again = llm.generate(prompts, params, use_tqdm=False)
        elapsed = time.perf_counter() - t0
        assert [list(o.outputs[0].token_ids) for o in again] == tokens, "a repeat changed tokens"
        print(f"TIMED {elapsed}", flush=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
