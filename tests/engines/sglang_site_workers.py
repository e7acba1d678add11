"""Rank programs for the SGLang plugin's converge sites beyond DSpark's accept: EAGLE's accept
(eagle_sample), DSPARK_PLAN (_schedule_verify_lens), DSPARK_DRAFT (draft_markov_block) and
DFlash's two-call accept (_accept_block). SGLang's own functions run; each rank feeds them its
own inputs (what differing float logits or coins would give it). Run like sglang_workers.py.

Each worker returns, per round, what the rank ends with, what it would hold alone (`own`: its
own inputs' result) and how many torch.distributed broadcasts the round issued (SGLang's and
the plugin's alike). `forge` = "RANK:ROUND": that
rank's plugin claims another round in the guard header at that round (the last one, so no
peer waits on it after), and the worker reports the DesyncError it gets.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_workers  # noqa: E402


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


class Rounds:
    """Runs a worker's rounds: counts broadcasts, forges a header, catches the DesyncError."""

    def __init__(self, forge: str):
        import torch.distributed as dist

        self.rank = int(os.environ["RANK"])
        rank, rnd = (forge or "-1:-1").split(":")
        self.forge = (int(rank), int(rnd))
        self.count, self._real = 0, dist.broadcast

        def counted(*args, **kwargs):
            self.count += 1
            return self._real(*args, **kwargs)

        dist.broadcast = counted

    def run(self, n: int, one_round) -> list[dict]:
        from specplan.plugins import common
        from specplan.runtime import DesyncError

        state = next((a.state for a in common._ACTIVE.values()), None)
        out = []
        for rnd in range(n):
            if (self.rank, rnd) == self.forge:
                state.round += 5
            before = self.count
            try:
                got = one_round(rnd)
            except DesyncError as exc:
                got = {"desync": str(exc)}
            got["broadcasts"] = self.count - before
            out.append(got)
        return out

    def done(self, out: dict, rounds: list[dict]) -> dict:
        import torch.distributed as dist

        from specplan.plugins import common

        state = next((a.state for a in common._ACTIVE.values()), None)
        dist.barrier()  # no rank leaves while a peer still talks to it
        return dict(out, rounds=rounds, skipped=getattr(state, "skipped_engine_broadcasts", None))


def tp_sync_over(group: str):
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.speculative.spec_tp_sync import SpecTpSync

    if group == "dp_tp":  # what SGLang's DSpark and DFlash workers pass: attn_tp under DP-attention
        from sglang.srt.layers.dp_attention import get_dp_tp_group

        return SpecTpSync(get_dp_tp_group())
    return SpecTpSync(getattr(get_parallel(), group))


def eagle(topology: str, speculative: str, hip: str, forge: str = "") -> dict:
    """eagle_sample's greedy tree verify (SGLang's Triton kernel, interpreted) on a chain of 3
    drafts; rank r's target logits accept (r + round) % 4 drafts with bonus 500 + 10 r + round.
    hip = "1": eagle_sample takes its HIP greedy branch, which broadcasts over attn_tp / tp."""
    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rounds = Rounds(forge)
    verify, batch = eagle_inputs(topology, hip)
    return rounds.done(out, rounds.run(3, lambda rnd: eagle_round(verify, batch, rounds.rank, rnd)))


EAGLE_BS, EAGLE_N = 4, 4  # requests, draft tokens per request (a chain of 3 drafts)


def eagle_inputs(topology: str, hip: str, **batch_fields):
    """eagle_sample's verify input and batch (SGLang's Triton greedy verify on the CPU)."""
    import torch
    import sglang.kernels.ops.speculative.spec_tree as spec_tree
    import sglang.srt.speculative.eagle_utils as eagle_utils
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode
    from sglang.srt.runtime_context import get_flags
    from sglang.srt.speculative.eagle_info import EagleVerifyInput

    get_flags().dp.enabled = json.loads(topology)["attn_dp_enabled"]  # as initialize_dp_attention does
    spec_tree._is_xpu = True  # the CPU stands for an XPU: SGLang's Triton greedy verify
    eagle_utils._is_hip = hip == "1"
    bs, n = EAGLE_BS, EAGLE_N
    rows = torch.arange(bs, dtype=torch.int64)[:, None] * n
    nxt = torch.tensor([1, 2, 3, -1], dtype=torch.int64).repeat(bs, 1)
    candidates = torch.tensor([7, 1, 2, 3], dtype=torch.int64).repeat(bs, 1)
    verify = EagleVerifyInput(
        draft_token=candidates.flatten(), custom_mask=None, positions=torch.zeros(bs * n, dtype=torch.int64),
        retrieve_index=rows + torch.arange(n), retrieve_next_token=nxt,
        retrieve_next_sibling=torch.full((bs, n), -1, dtype=torch.int64), retrieve_cum_len=None,
        spec_steps=n - 1, topk=1, draft_token_num=n, capture_hidden_mode=CaptureHiddenMode.FULL,
        seq_lens_sum=20 * bs, seq_lens_cpu=torch.full((bs,), 20))
    info = SimpleNamespace(acc_additive_penalties=None, acc_scaling_penalties=None, logit_bias=None,
                           is_all_greedy=True, has_watermark_candidates=False, sampling_seed=None)
    fields = dict(reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(bs)], **batch_fields)
    batch = SimpleNamespace(device="cpu", forward_mode=SimpleNamespace(is_idle=lambda: False),
                            seq_lens=torch.full((bs,), 20), sampling_info=info, return_logprob=False,
                            **fields)
    return verify, batch


def eagle_round(verify, batch, rank: int, rnd: int) -> dict:
    """One eagle_sample: this rank's target accepts (rank + rnd) % 4 drafts."""
    import torch
    import sglang.srt.speculative.eagle_utils as eagle_utils

    bs, n, vocab = EAGLE_BS, EAGLE_N, 1000
    k = (rank + rnd) % n  # drafts this rank's target accepts
    target = [1, 2, 3][:k] + [500 + 10 * rank + rnd] + [9] * (n - 1 - k)
    logits = torch.zeros(bs * n, vocab)
    logits[torch.arange(bs * n), torch.tensor(target).repeat(bs)] = 1.0
    predict, accept_lens, accept_index = eagle_utils.eagle_sample(
        verify, batch, SimpleNamespace(next_token_logits=logits))
    own_predict = [0] * (bs * n)
    for b in range(bs):
        own_predict[b * n: b * n + k + 1] = target[:k + 1]
    own_index = [[b * n + j if j <= k else -1 for j in range(n)] for b in range(bs)]
    return {"predict": predict.tolist(), "accept_lens": accept_lens.tolist(),
            "accept_index": accept_index.tolist(),
            "own": {"predict": own_predict, "accept_lens": [k + 1] * bs, "accept_index": own_index}}


def dspark_plan(topology: str, speculative: str, group: str, forge: str = "") -> dict:
    """DSparkVerifyPlanner._schedule_verify_lens (the torch top-k) with this rank's own
    confidence and budget (2 + rank): the verify lens it plans, and the budget converged."""
    import torch
    from sglang.kernels.ops.speculative.dspark.dspark_schedule import ScheduleVerifyLensTopk
    from sglang.srt.speculative.dspark_components.dspark_planner import (DSparkScheduleConfig,
                                                                         DSparkVerifyPlanner)

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    planner = SimpleNamespace(_budget_planner=object(), _schedule_cfg=DSparkScheduleConfig(gamma=3),
                              _tp_sync=tp_sync_over(group))
    rounds = Rounds(forge)
    bs = 4

    def one_round(rnd: int) -> dict:
        gen = torch.Generator().manual_seed(100 * rounds.rank + rnd)
        confidence = torch.rand(bs, 3, generator=gen)
        lens = DSparkVerifyPlanner._schedule_verify_lens(
            planner, req_pool_indices=torch.arange(bs), prefix_lens=torch.full((bs,), 20),
            device=torch.device("cpu"), confidence=confidence, budget=2 + rounds.rank)
        from specplan.plugins import common

        state = next((a.state for a in common._ACTIVE.values()), None)
        budget = None if state is None or state.last_budget is None else int(state.last_budget)
        own = ScheduleVerifyLensTopk.execute(confidence=confidence, budget=2 + rounds.rank,
                                             cfg=planner._schedule_cfg)
        return {"verify_lens": lens.tolist(), "budget": budget,
                "own": {"verify_lens": own.tolist(), "budget": 2 + rounds.rank}}

    return rounds.done(out, rounds.run(3, one_round))


class _MarkovHead:
    """Stands for DSpark's Markov head: no bias, so each step's token is base_logits' argmax."""

    vocab_shard = None

    def init_state(self, hidden):
        return None

    def step_bias(self, prev_tokens, *, hidden_states, state):
        import torch

        return torch.zeros(prev_tokens.shape[0], 1000), state

    def step_logits_dtype(self, dtype):
        import torch

        return torch.float32

    def greedy_w2_weight(self):
        return None


def dspark_draft(topology: str, speculative: str, group: str, forge: str = "") -> dict:
    """dspark_draft.draft_markov_block (greedy) with this rank's own base logits: step s of
    rank r drafts token 10 * r + s + round."""
    import torch
    import sglang.srt.speculative.dspark_components.dspark_draft as dspark_draft

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    tp_sync, rounds, bs, gamma = tp_sync_over(group), Rounds(forge), 4, 3

    def one_round(rnd: int) -> dict:
        logits = torch.zeros(bs, gamma, 1000)
        for s in range(gamma):
            logits[:, s, 10 * rounds.rank + s + rnd] = 1.0
        tokens, _ = dspark_draft.draft_markov_block(  # looked up at call time, as SGLang's caller does
            markov_head=_MarkovHead(), base_logits=logits, anchor_tokens=torch.zeros(bs, dtype=torch.int64),
            draft_hidden=None, step_temperatures=torch.zeros(bs), tp_sync=tp_sync, greedy_draft=True,
            noise=dspark_draft.DraftNoise(key=1, offset=torch.zeros(1, dtype=torch.int64)))
        own = [[10 * rounds.rank + s + rnd for s in range(gamma)]] * bs
        return {"draft_tokens": tokens.tolist(), "own": {"draft_tokens": own}}

    return rounds.done(out, rounds.run(3, one_round))


def dflash_accept(topology: str, speculative: str, group: str, forge: str = "") -> dict:
    """DFlashWorkerV2._accept_block on its selector path: this rank's selector accepts
    (rank + round) % 4 drafts with bonus 300 + 10 rank + round; SGLang syncs accept_len, then
    bonus (DFLASH_SELECTOR), and commits the block."""
    import torch
    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rounds, bs, block = Rounds(forge), 4, 4
    worker = SimpleNamespace(_selector_sample=(None, None), _tp_sync=tp_sync_over(group))

    def one_round(rnd: int) -> dict:
        def selector(**_):
            return (torch.full((bs,), (rounds.rank + rnd) % block, dtype=torch.int32),
                    torch.full((bs,), 300 + 10 * rounds.rank + rnd, dtype=torch.int64))

        worker._selector_sampling_accept = selector
        candidates = torch.arange(block, dtype=torch.int64).repeat(bs, 1)
        accept_len, commit_lens, bonus, out_tokens, _ = DFlashWorkerV2._accept_block(
            worker, candidates=candidates, next_token_logits=None, sampling_info=None, draft_input=None,
            prefix_lens=torch.full((bs,), 20), bs=bs)
        k, b = (rounds.rank + rnd) % block, 300 + 10 * rounds.rank + rnd
        own_tokens = [*range(1, block), 0]  # _commit_accept: the drafts shifted left, bonus at k
        own_tokens[k] = b
        return {"accept_len": accept_len.tolist(), "bonus": bonus.tolist(),
                "commit_lens": commit_lens.tolist(), "out_tokens": out_tokens.tolist(),
                "own": {"accept_len": [k] * bs, "bonus": [b] * bs, "commit_lens": [k + 1] * bs,
                        "out_tokens": [own_tokens] * bs}}

    return rounds.done(out, rounds.run(3, one_round))


def eagle_results(topology: str, speculative: str, hip: str, forge: str = "") -> dict:
    """eagle as above, then SGLang's real SchedulerBatchResultProcessor.process_batch_result_decode
    for the round's result. It runs past its wait for the result copy to its first read of the
    result's outputs, where the test stops it (the rest reads the scheduler's request state)
    and reports that SGLang went on to commit the round."""
    from sglang.srt.managers.scheduler_components.batch_result_processor import (
        SchedulerBatchResultProcessor)

    class Committed(Exception):
        pass

    class Result:  # a GenerationBatchResult whose copy is done; its outputs are where we stop
        copy_done = None

        def __getattr__(self, name):
            raise Committed(name)

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rounds = Rounds(forge)
    verify, batch = eagle_inputs(topology, hip)
    processor = SchedulerBatchResultProcessor.__new__(SchedulerBatchResultProcessor)

    def one_round(rnd: int) -> dict:
        got = eagle_round(verify, batch, rounds.rank, rnd)
        try:
            SchedulerBatchResultProcessor.process_batch_result_decode(processor, batch, Result())
        except Committed:
            got["committed"] = True
        return got

    return rounds.done(out, rounds.run(3, one_round))


WORKERS = {"eagle": eagle, "eagle_results": eagle_results, "dspark_plan": dspark_plan, "dspark_draft": dspark_draft,
           "dflash_accept": dflash_accept}
