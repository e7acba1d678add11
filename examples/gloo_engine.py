"""A miniature engine on gloo: every round converges drafts, the verify plan and the accept.

    specplan compile examples/tp2-dspark-cpu.yaml -o build/tp2-dspark-cpu
    torchrun --nproc-per-node 2 examples/gloo_engine.py build/tp2-dspark-cpu/plan.json

Each rank draws its own drafts and target tokens on purpose (as float noise would); the
converges hand every rank the source rank's values, so all ranks commit the same tokens.
"""

import sys

import torch

import specplan.runtime as spr
from specplan.runtime.kernels import greedy_accept

rt = spr.bind(sys.argv[1])  # torch.distributed from the torchrun env; fingerprints agreed
gamma = rt.plan.plan.speculative.num_steps
bs = 4
seq_lens = torch.full((bs,), 10, dtype=torch.int32)
noise = torch.Generator().manual_seed(rt.rank)

for rnd in range(1, 4):
    drafts = torch.randint(0, 100, (bs, gamma), generator=noise)
    drafts = rt.converge("dspark_draft", {"draft_tokens": drafts}, round=rnd, live_rows=bs)["draft_tokens"]
    plan = rt.converge("dspark_plan", {  # fused with dspark_plan_verify: one collective
        "verify_budget": torch.tensor(bs * (gamma + 1), dtype=torch.int32),
        "verify_lens": torch.full((bs,), gamma + 1, dtype=torch.int32)}, round=rnd, live_rows=bs)
    target = torch.randint(0, 100, (bs, gamma + 1), generator=noise)  # the target's argmax
    target[:, :2] = drafts[:, :2]  # so some drafts get accepted
    _, correct, bonus = greedy_accept(drafts, target)
    accepted = rt.accept("dspark_accept_greedy", {
        "correct_len_greedy": correct, "bonus_greedy": bonus,
        "cap_trim_lens_greedy": torch.zeros(bs, dtype=torch.int32)},
        round=rnd, live_rows=bs, prefix_lens=seq_lens, draft_tokens=drafts)
    seq_lens = accepted.new_seq_lens
    rt.maybe_probe(rnd, {"draft_tokens": drafts, **plan, **accepted.decisions, "seq_lens": seq_lens})

# One write per rank (print writes the line and its newline apart): ranks that finish together
# on one torchrun stdout must not interleave.
sys.stdout.write(f"rank {rt.rank}: seq_lens {seq_lens.tolist()} out_tokens {accepted.out_tokens.tolist()}\n")
sys.stdout.flush()
rt.close()
