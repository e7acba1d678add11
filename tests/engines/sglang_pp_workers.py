"""Rank programs for the SGLang plugin under pipeline parallelism: SGLang 0.5.23's own PP relay
(scheduler_pp_mixin) on gloo, the plugin loaded by SGLang's loader. Run like sglang_workers.py.

Each decode round, as SGLang's `event_loop_pp` runs it for one microbatch:
- the last stage verifies and accepts with the real `eagle_sample` (each rank's own target
  logits, as differing floats or coins give them: rank r accepts (r + round) % 4 drafts) and
  drafts the next round's chain with the real `build_eagle_verify_input` (each rank's own
  draft proposals), then makes its output dict with the real `_pp_prepare_tensor_dict` and
  sends it with the real `_pp_send_dict_to_next_stage` (tensors split over attn_tp, as SGLang
  sends them);
- every stage receives it with the real `_pp_recv_dict_from_prev_stage`, processes it with
  the real `_pp_prep_batch_result` and forwards it, round the ring back to the last stage.
Only what touches memory pools is recorded instead of run: `_pp_spec_commit_relayed_accept`
and `_pp_spec_adopt_relayed_tree` keep what SGLang hands them (what the rank commits).

`odd` = "gen": on stage 0, row 1's request-to-token row is handed out again (its generation
bumped) at round 1 while that round's result is in flight: the stale-slot bug. "kind": stage 0's
forward at round 1 was an extend, so the decode result it receives answers another batch.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections import defaultdict, deque
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_draft_workers  # noqa: E402
import sglang_site_workers  # noqa: E402
import sglang_workers  # noqa: E402

BS, N, STEPS = sglang_site_workers.EAGLE_BS, sglang_site_workers.EAGLE_N, 3


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


def _scheduler():
    """A Scheduler as far as the PP relay reads it: SGLang's mixin on its real groups."""
    import torch
    import sglang.srt.distributed.parallel_state as ps
    from sglang.srt.managers.scheduler_pp_mixin import SchedulerPPMixin

    class Scheduler(SchedulerPPMixin):
        def _pp_spec_commit_relayed_accept(self, batch, fwd_batch, fwd_rids, live_rids, loc, pp_outputs):
            self.commits.append({"accept_lens": pp_outputs["spec_accept_lens"].tolist(),
                                 "accept_index": pp_outputs["spec_accept_index"].tolist(),
                                 "bonus": pp_outputs["spec_bonus_tokens"].tolist()})

        def _pp_spec_adopt_relayed_tree(self, batch, fwd_rids, pp_outputs):
            chain = pp_outputs["spec_next_chain"].view(len(fwd_rids), N)
            self.commits[-1]["next_chain"] = chain.tolist()

    s = Scheduler()
    s.pp_group, s.attn_tp_group, s._pp_spec_relay = ps._PP, ps._ATTN_TP, True
    s.pp_comm_stream, s.pp_comm_stream_ctx, s.copy_stream_ctx = None, contextlib.nullcontext(), contextlib.nullcontext()
    s.device_module, s._pp_tensor_dict_inbox = torch.cpu, defaultdict(deque)
    s.tp_worker = SimpleNamespace(model_runner=SimpleNamespace(sampling_observer=None))
    s.commits = []
    return s


def _tail_draft(rank: int, rnd: int, batch, bonus):
    """The last stage's tail draft: this rank's own proposals through SGLang's draft tree code
    and the (hooked) build_eagle_verify_input: the next round's verify tokens."""
    import torch
    import sglang.kernels.ops.speculative.spec_tree as spec_tree
    import sglang.srt.speculative.eagle_utils as eagle_utils
    import sglang.srt.speculative.eagle_worker_v2 as eagle_worker_v2
    from sglang.kernels.ops.speculative.spec_tree import TreeMaskMode
    from sglang.srt.speculative.spec_utils import select_top_k_tokens

    spec_tree._is_xpu = True
    gen = torch.Generator().manual_seed(1000 * rank + rnd)
    topk_p, topk_index = sglang_draft_workers._proposal(gen, BS, 1)
    scores, lists = None, ([], [], [])
    for i in range(STEPS):
        _, _, scores, tree_info = select_top_k_tokens(i, topk_p, topk_index, None, scores, 1)
        for acc, part in zip(lists, tree_info):
            acc.append(part)
        if i < STEPS - 1:
            topk_p, topk_index = sglang_draft_workers._proposal(gen, BS, 1)
    parent_list, top_scores_index, draft_tokens = eagle_utils.organize_draft_results(*lists, N)
    target = SimpleNamespace(model_runner=SimpleNamespace(attn_backend=SimpleNamespace(verify_mask=None)))
    verify = eagle_worker_v2.build_eagle_verify_input(
        batch, SimpleNamespace(bonus_tokens=bonus.to(torch.int64)), parent_list, top_scores_index,
        draft_tokens, None, target_worker=target, topk=1, num_steps=STEPS, num_draft_tokens=N,
        tree_mask_mode=TreeMaskMode.FULL_MASK, device="cpu")
    return verify.draft_token, parent_list, top_scores_index


def pp_relay(topology: str, speculative: str, odd: str = "none") -> dict:
    import torch
    import sglang.srt.distributed.parallel_state as ps
    from sglang.srt.managers.scheduler_pp_mixin import PPBatchMetadata
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rank, pp = int(os.environ["RANK"]), ps._PP
    sched = _scheduler()
    pool = SimpleNamespace(req_generation=torch.zeros(BS, dtype=torch.int64))
    rows = dict(req_to_token_pool=pool, req_pool_indices_cpu=torch.arange(BS))
    verify, batch = sglang_site_workers.eagle_inputs(topology, "0", **rows)
    batch.forward_mode = ForwardMode.DECODE
    batch.spec_algorithm = SimpleNamespace(is_dspark=lambda: False)
    batch.seq_lens_cpu = batch.seq_lens.clone()
    sent, errors = [], []
    for rnd in range(3):
        batch.seq_lens_sum = int(batch.seq_lens.sum())
        try:
            if pp.is_last_rank:
                sent.append(_last_stage_forward(sched, verify, batch, rank, rnd))
            else:
                if odd == "gen" and pp.is_first_rank and rnd == 1:
                    pool.req_generation[1] += 1  # row 1 handed to another request meanwhile
                fwd = batch
                if odd == "kind" and pp.is_first_rank and rnd == 1:  # stage 0 ran an extend here
                    fwd = SimpleNamespace(**dict(vars(batch), forward_mode=ForwardMode.EXTEND))
                _receive(sched, batch, PPBatchMetadata(can_run_cuda_graph=False, fwd_batch=fwd))
            if pp.is_last_rank:  # the ring closes: the last stage processes what came round
                _receive(sched, batch, PPBatchMetadata(can_run_cuda_graph=False, fwd_batch=batch),
                         forward=False)
        except Exception as exc:  # noqa: BLE001 - the test reads which error and where
            errors.append({"round": rnd, "error": f"{type(exc).__name__}: {exc}"})
            import time

            time.sleep(3)  # rank 0 hosts the store a peer's BatchMismatch asks for the source's rows
            break
    from specplan.plugins import common

    state = next((a.state for a in common._ACTIVE.values()), None)
    relay = getattr(state, "pp", None)
    if not errors:
        torch.distributed.barrier()
    return dict(out, stage=pp.rank_in_group, sent=sent, commits=sched.commits, errors=errors,
                checked=None if relay is None else relay.checked)


def _last_stage_forward(sched, verify, batch, rank: int, rnd: int) -> dict:
    """Verify + accept (eagle_sample), the tail draft, the output dict, the send to stage 0."""
    import torch

    got = sglang_site_workers.eagle_round(verify, batch, rank, rnd)
    predict = torch.tensor(got["predict"], dtype=torch.int32)
    accept_lens = torch.tensor(got["accept_lens"], dtype=torch.int32)
    accept_index = torch.tensor(got["accept_index"], dtype=torch.int32)
    accepted = predict[accept_index.clamp(min=0).long()]  # SGLang's bonus: the last accepted token
    bonus = accepted.gather(1, (accept_lens - 1).long().unsqueeze(1)).squeeze(1)
    chain, parents, top = _tail_draft(rank, rnd, batch, bonus)
    result = SimpleNamespace(
        next_token_ids=predict, accept_lens=accept_lens, new_seq_lens=batch.seq_lens + accept_lens,
        accept_index=accept_index, next_draft_input=SimpleNamespace(bonus_tokens=bonus, topk_p=None),
        next_verify_chain=chain, next_verify_parent_list=parents, next_verify_top_scores_index=top,
        logits_output=None)
    tensors = sched._pp_prepare_tensor_dict(result, batch)
    sched._pp_send_dict_to_next_stage(tensors, async_send=False, msg_type="output")
    return {"accept_lens": accept_lens.tolist(), "bonus": bonus.tolist(),
            "next_chain": chain.view(BS, N).tolist(), "keys": sorted(tensors)}


def _receive(sched, batch, metadata, forward: bool = True) -> None:
    """SGLang's receive of the output dict, its processing, and its forward to the next stage."""
    from sglang.srt.model_executor.forward_batch_info import PPProxyTensors

    tensors, _ = sched._pp_recv_dict_from_prev_stage()
    outputs = PPProxyTensors(tensors)
    sched._pp_prep_batch_result(batch, metadata, outputs)
    if forward and not sched.pp_group.is_last_rank:
        sched._pp_send_dict_to_next_stage(outputs.tensors, async_send=False, msg_type="output")


WORKERS = {"pp_relay": pp_relay}
