"""Rank programs for the SGLang plugin's EAGLE-family sites: `<method>_target` through
`EagleDraftWorker._draft_extend_for_prefill`, `<method>_draft` through
`eagle_worker_common.build_eagle_verify_input`, `<method>_draft_extend` through
`EagleDraftWorker._draft_extend_for_decode`. Run like sglang_workers.py; each worker returns,
per round, what the rank ends with and what it would hold alone (`own`), as
sglang_site_workers.py's do.

draft: SGLang's own draft-tree code runs on this rank's own draft proposals (what differing
float logits give each TP rank): `select_top_k_tokens` per step, `organize_draft_results`, then
the hooked `build_eagle_verify_input`, called through the name EagleDraftWorker.draft calls
(eagle_worker_v2's `from ... import` binding, which SGLang's HookRegistry re-points), builds
the verify input (tree mask, positions, retrieve indices: SGLang's Triton tree kernel,
interpreted). Only the draft model's step outputs are
made up (seeded per rank and round).

draft_extend: the real `_draft_extend_for_decode` on a worker whose draft model stands in
(logits per rank and round) and whose KV-cache preparation (`prepare_for_draft_extend`, which
builds a ForwardBatch over the memory pools) is replaced by the batch it would hand the model.

target: the real `_draft_extend_for_prefill` on this rank's own int32 first tokens (what its
own sampler draws); only `ForwardBatch.init_new` (memory pools) and the draft model (the same
weights on every rank: logits a function of each request's tail token) stand in. Each round
first calls it on an idle batch (DP-attention's), which the plugin leaves unconverged.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_site_workers  # noqa: E402
import sglang_workers  # noqa: E402

BS, VOCAB, SEQ = 4, 1000, 5


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


def _proposal(gen, rows: int, topk: int):
    """One draft step's top-k (probabilities, token ids), as fast_topk returns them."""
    import torch
    from sglang.srt.utils.common import fast_topk

    probs = torch.softmax(torch.randn(rows, VOCAB, generator=gen) * 4, dim=-1)
    return fast_topk(probs, topk, dim=-1)


def draft(topology: str, speculative: str, forge: str = "") -> dict:
    import torch
    import sglang.kernels.ops.speculative.spec_tree as spec_tree
    import sglang.srt.speculative.eagle_utils as eagle_utils
    import sglang.srt.speculative.eagle_worker_v2 as eagle_worker_v2
    from sglang.kernels.ops.speculative.spec_tree import TreeMaskMode
    from sglang.srt.speculative.spec_utils import select_top_k_tokens

    spec = json.loads(speculative)
    out = sglang_workers.start_engine(json.loads(topology), spec)
    spec_tree._is_xpu = True  # the CPU stands for an XPU: SGLang's Triton tree build
    topk, steps = spec["speculative_eagle_topk"], spec["speculative_num_steps"]
    n = spec["speculative_num_draft_tokens"]
    rounds = sglang_site_workers.Rounds(forge)
    seq_lens = torch.full((BS,), SEQ, dtype=torch.int64)
    target = SimpleNamespace(model_runner=SimpleNamespace(attn_backend=SimpleNamespace(verify_mask=None)))
    batch = SimpleNamespace(forward_mode=SimpleNamespace(is_idle=lambda: False), seq_lens=seq_lens,
                            seq_lens_sum=SEQ * BS, reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(BS)])
    draft_input = SimpleNamespace(bonus_tokens=torch.arange(BS, dtype=torch.int64) + 900)

    def one_round(rnd: int) -> dict:
        gen = torch.Generator().manual_seed(1000 * rounds.rank + rnd)
        topk_p, topk_index = _proposal(gen, BS, topk)  # the draft extend's, this rank's own
        scores, lists = None, ([], [], [])
        for i in range(steps):  # EagleDraftWorker.draft_forward's loop, the model's steps made up
            _, _, scores, tree_info = select_top_k_tokens(i, topk_p, topk_index, None, scores, topk)
            for acc, part in zip(lists, tree_info):
                acc.append(part)
            if i < steps - 1:
                topk_p, topk_index = _proposal(gen, BS * topk, topk)
        parent_list, top_scores_index, draft_tokens = eagle_utils.organize_draft_results(*lists, n)
        alone = eagle_utils.build_tree_kernel_efficient(  # what this rank would verify alone
            draft_input.bonus_tokens, parent_list.clone(), top_scores_index.clone(), draft_tokens.clone(),
            seq_lens, SEQ * BS, topk, steps, n, TreeMaskMode.FULL_MASK)
        verify = eagle_worker_v2.build_eagle_verify_input(  # EagleDraftWorker.draft's own binding
            batch, draft_input, parent_list, top_scores_index, draft_tokens, None, target_worker=target,
            topk=topk, num_steps=steps, num_draft_tokens=n, tree_mask_mode=TreeMaskMode.FULL_MASK,
            device="cpu")
        got = (verify.custom_mask, verify.positions, verify.retrieve_index, verify.retrieve_next_token,
               verify.retrieve_next_sibling, verify.draft_token)
        names = ("custom_mask", "positions", "retrieve_index", "retrieve_next_token",
                 "retrieve_next_sibling", "verify_tokens")
        own = {k: v.int().tolist() for k, v in zip(names, alone)}
        mine = {k: v.int().tolist() for k, v in zip(names, got)}
        mine["draft_tokens"] = draft_tokens.tolist()  # written back in place
        own["draft_tokens"] = alone[5].view(BS, n)[:, 1:].tolist()
        return dict(mine, own=own)

    return rounds.done(out, rounds.run(3, one_round))


class _DraftModel:
    """Stands for the draft model: logits per rank and round, one row per extend token."""

    canary_manager = None

    def __init__(self, rank: int):
        self.rank, self.round = rank, 0
        self.model_config = SimpleNamespace(model_is_mrope=False)

    def forward(self, forward_batch):
        import torch

        gen = torch.Generator().manual_seed(7000 + 100 * self.rank + self.round)
        rows = forward_batch.input_ids.shape[0]
        logits = torch.randn(rows, VOCAB, generator=gen) * 4
        return SimpleNamespace(logits_output=SimpleNamespace(next_token_logits=logits, hidden_states=None))


def draft_extend(topology: str, speculative: str, forge: str = "") -> dict:
    import torch
    import sglang.srt.speculative.eagle_worker_v2 as eagle_worker_v2

    spec = json.loads(speculative)
    out = sglang_workers.start_engine(json.loads(topology), spec)
    topk, n = spec["speculative_eagle_topk"], spec["speculative_num_draft_tokens"]
    rounds = sglang_site_workers.Rounds(forge)
    model = _DraftModel(rounds.rank)

    def prepare(draft_extend_input, batch, predict, *args, **kwargs):  # the model's input rows
        return SimpleNamespace(input_ids=predict, forward_mode=batch.forward_mode,
                               spec_info=draft_extend_input)

    eagle_worker_v2.prepare_for_draft_extend = prepare
    worker = SimpleNamespace(plan_stream=None, plan_stream_ctx=contextlib.nullcontext(),
                             cuda_graph_runner_for_draft_extend=None, seed_dsa_topk_from_draft_extend=False,
                             draft_runner=model, topk=topk, speculative_num_draft_tokens=n, device="cpu")
    batch = SimpleNamespace(forward_mode=SimpleNamespace(is_idle=lambda: False),
                            seq_lens=torch.full((BS,), SEQ), sampling_info=SimpleNamespace(temperatures=None),
                            reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(BS)])

    def one_round(rnd: int) -> dict:
        model.round = rnd
        accept_lens = torch.full((BS,), 1 + rnd % n, dtype=torch.int32)
        select = torch.arange(BS) * n + accept_lens - 1
        tokens = torch.arange(BS * n, dtype=torch.int64)
        result = SimpleNamespace(prepared_draft_extend_inputs=(accept_lens - 1, select, tokens),
                                 accept_lens=accept_lens, next_token_ids=tokens, new_seq_lens=None,
                                 logits_output=SimpleNamespace(hidden_states=None),
                                 next_draft_input=SimpleNamespace())
        # what this rank would hold alone: its own logits at the selected rows, SGLang's top-k rule
        logits = model.forward(SimpleNamespace(input_ids=tokens)).logits_output.next_token_logits[select]
        if topk == 1:
            own_index = torch.argmax(logits, dim=-1, keepdim=True)
            own_p = torch.ones_like(own_index, dtype=torch.float32)
        else:
            own_p, own_index = torch.topk(torch.softmax(logits, dim=-1), topk, dim=-1)
        eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode(worker, batch, result)
        nxt = result.next_draft_input
        return {"topk_index": nxt.topk_index.tolist(), "topk_p": _rounded(nxt.topk_p),
                "own": {"topk_index": own_index.tolist(), "topk_p": _rounded(own_p)}}

    return rounds.done(out, rounds.run(3, one_round))


class _PrefillDraftModel:
    """Stands for the draft model in the prefill's extend: the same weights on every rank, so
    each request's logits are a function of its tail token (the first token SGLang feeds it)."""

    canary_manager = None

    def forward(self, forward_batch):
        import torch

        last = torch.tensor(forward_batch.extend_lens, dtype=torch.int64).cumsum(0) - 1
        return SimpleNamespace(logits_output=SimpleNamespace(
            next_token_logits=prefill_logits(forward_batch.input_ids[last]), hidden_states=None))


def prefill_logits(tails):
    import torch

    rows = [torch.randn(VOCAB, generator=torch.Generator().manual_seed(int(t))) * 4 for t in tails]
    return torch.stack(rows) if rows else torch.zeros(0, VOCAB)


def target(topology: str, speculative: str, forge: str = "") -> dict:
    """`<method>_target`: the real `_draft_extend_for_prefill` fed this rank's own first tokens
    (what each rank's own sampler draws), as EAGLEWorkerV2._forward_prefill_batch calls it."""
    import torch
    import sglang.srt.speculative.eagle_worker_v2 as eagle_worker_v2
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    spec = json.loads(speculative)
    out = sglang_workers.start_engine(json.loads(topology), spec)
    topk = spec["speculative_eagle_topk"]
    rounds = sglang_site_workers.Rounds(forge)

    def init_new(batch, runner, **kwargs):  # ForwardBatch.init_new builds over the memory pools
        return SimpleNamespace(input_ids=batch.input_ids, extend_lens=batch.extend_lens,
                               forward_mode=batch.forward_mode, spec_info=batch.spec_info)

    eagle_worker_v2.ForwardBatch = SimpleNamespace(init_new=init_new)
    algorithm = SpeculativeAlgorithm.from_string(spec["speculative_algorithm"])
    worker = SimpleNamespace(speculative_algorithm=algorithm, seed_dsa_topk_from_draft_extend=False,
                             draft_runner=_PrefillDraftModel(), topk=topk, device="cpu")
    extend_lens = [3, 1, 4, 2]

    def prefill_batch(rnd: int, lens: list[int]):
        return SimpleNamespace(
            forward_mode=SimpleNamespace(is_idle=lambda: not lens), extend_lens=lens,
            input_ids=torch.arange(sum(lens), dtype=torch.int64) + 100 * rnd,
            chunked_req=None, chunked_req_next_prompt_token=None, seq_lens=torch.tensor(lens),
            sampling_info=SimpleNamespace(temperatures=None),
            reqs=[SimpleNamespace(rid=f"req-{rnd}-{i}") for i in range(len(lens))])

    def one_round(rnd: int) -> dict:
        # an idle batch first (DP-attention: the whole replica idle together): nothing converged
        idle = eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill(
            worker, prefill_batch(rnd, []), None, torch.zeros(0, dtype=torch.int32))
        assert idle.topk_index.shape[0] == 0
        batch = prefill_batch(rnd, extend_lens)
        # the sampler's int32 first tokens, this rank's own draw
        mine = torch.arange(BS, dtype=torch.int32) * 100 + 10 * rounds.rank + rnd + 300
        alone = mine.tolist()  # SGLang's own result: the rank keeps what it drew
        own_topk = torch.topk(torch.softmax(prefill_logits(alone), dim=-1), topk, dim=-1).indices
        nxt = eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill(worker, batch, None, mine)
        tails = batch.input_ids[torch.tensor(extend_lens).cumsum(0) - 1]  # the draft extend's input
        return {"next_token_ids": mine.tolist(), "bonus_tokens": nxt.bonus_tokens.tolist(),
                "tails": tails.tolist(), "topk_index": nxt.topk_index.tolist(),
                "own": {"next_token_ids": alone, "bonus_tokens": alone, "tails": alone,
                        "topk_index": own_topk.tolist()}}

    return rounds.done(out, rounds.run(3, one_round))


def _rounded(p) -> list:
    return [[round(x, 5) for x in row] for row in p.tolist()]


WORKERS = {"draft": draft, "draft_extend": draft_extend, "target": target}
