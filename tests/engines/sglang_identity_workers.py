"""Rank programs for batch identity inside SGLang: the plugin hands the runtime SGLang's own rows,
request ids (`reqs[i].rid`) and row generations (a real ReqToTokenPool's `req_generation`
at `req_pool_indices_cpu`). Run like sglang_workers.py.

Every rank allocates the batch's four rows from its own ReqToTokenPool (SGLang's alloc_rows,
which bumps a row's generation each time it hands it out). With `reuse` = "1", rank 1 gives
row 1 back and takes it again before round 1 (a retraction and re-admission seen by that rank
alone): same request, the row's generation one higher, so its batch differs from its source's
by one generation. Three accept methods, each SGLang's own function:
- eagle3: eagle_utils.eagle_sample, which has the batch;
- dspark: dspark_verify.build_accept_outs, dflash: DFlashWorkerV2._accept_block, which get no
  batch: each runs inside the plugin's hook of the worker's forward_batch_generation (the hook
  the registry holds, called with the batch; the forward's body is a stand-in that calls the
  accept function, as SGLang's forward does after its verify pass).
Per round each rank reports what it ended with, or the BatchMismatch it raised.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_site_workers  # noqa: E402
import sglang_workers  # noqa: E402

BS = 4
FORWARD = {"dspark": "sglang.srt.speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2"
                     ".forward_batch_generation",
           "dflash": "sglang.srt.speculative.dflash_worker_v2.DFlashWorkerV2.forward_batch_generation"}


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


def identity(topology: str, speculative: str, method: str, reuse: str) -> dict:
    import torch
    import torch.distributed as dist
    from sglang.srt.mem_cache.memory_pool import ReqToTokenPool

    from specplan.runtime.errors import BatchMismatch

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rank = int(os.environ["RANK"])
    pool = ReqToTokenPool(size=8, max_context_len=32, device="cpu", enable_memory_saver=False)
    slots = pool.alloc_rows(BS)
    one_round = ROUNDS[method](topology, rank, slots, pool)
    rounds = []
    for rnd in range(3):
        if rnd == 1 and reuse == "1" and rank == 1:
            pool.free_rows([slots[1]])
            assert pool.alloc_rows(1) == [slots[1]]  # the same row, handed out once more
        gens = pool.req_generation[torch.tensor(slots)].tolist()
        try:
            got = one_round(rnd)
        except BatchMismatch as exc:
            rounds.append({"generations": gens, "mismatch": str(exc)})
            break
        rounds.append(dict(got, generations=gens))
        if reuse == "1" and rnd == 1:
            break  # the peer stopped at this round
    dist.barrier()  # no rank leaves while a peer still asks it for its rows
    return dict(out, rounds=rounds)


def _batch_fields(slots, pool) -> dict:
    import torch

    return dict(req_to_token_pool=pool, req_pool_indices_cpu=torch.tensor(slots, dtype=torch.int64))


def _eagle(topology: str, rank: int, slots, pool):
    verify, batch = sglang_site_workers.eagle_inputs(topology, "0", **_batch_fields(slots, pool))

    def one_round(rnd: int) -> dict:
        got = sglang_site_workers.eagle_round(verify, batch, rank, rnd)
        return {"accept_lens": got["accept_lens"]}

    return one_round


def _forward_hook(method: str):
    """The plugin's hook of the worker's forward_batch_generation, as SGLang's registry holds it."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    return next(h for _, h, src in HookRegistry._hooks[FORWARD[method]]
                if src and src.plugin_name == "specplan")


def _schedule_batch(slots, pool):
    return SimpleNamespace(reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(BS)],
                           **_batch_fields(slots, pool))


def _dspark(topology: str, rank: int, slots, pool):
    import torch
    from sglang.srt.speculative.dspark_components.dspark_verify import build_accept_outs
    from sglang.srt.speculative.spec_tp_sync import SpecTpSyncSite

    tp_sync, gamma, forward = sglang_site_workers.tp_sync_over("tp_group"), 3, _forward_hook("dspark")
    batch = _schedule_batch(slots, pool)

    def body(worker, batch, rnd):
        res = build_accept_outs(
            correct_len=torch.full((BS,), (rank + rnd) % (gamma + 1), dtype=torch.int32),
            bonus=torch.full((BS,), 100 + 10 * rank + rnd, dtype=torch.int64),
            cap_trim_lens=torch.zeros(BS, dtype=torch.int32), prefix_lens=torch.full((BS,), 20, dtype=torch.int32),
            draft_tokens=torch.arange(BS * gamma, dtype=torch.int64).reshape(BS, gamma), gamma=gamma,
            verify_num_draft_tokens=gamma + 1, tp_sync=tp_sync, sync_site=SpecTpSyncSite.DSPARK_ACCEPT_SAMPLE)
        return {"bonus": res.bonus.tolist(), "correct_len": res.correct_len.tolist()}

    return lambda rnd: forward(body, SimpleNamespace(), batch, rnd)


def _dflash(topology: str, rank: int, slots, pool):
    import torch
    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2

    block, forward = 4, _forward_hook("dflash")
    worker = SimpleNamespace(_selector_sample=(None, None), _tp_sync=sglang_site_workers.tp_sync_over("tp_group"))
    batch = _schedule_batch(slots, pool)

    def body(worker, batch, rnd):
        worker._selector_sampling_accept = lambda **_: (
            torch.full((BS,), (rank + rnd) % block, dtype=torch.int32),
            torch.full((BS,), 300 + 10 * rank + rnd, dtype=torch.int64))
        accept_len, _, bonus, _, _ = DFlashWorkerV2._accept_block(
            worker, candidates=torch.arange(block, dtype=torch.int64).repeat(BS, 1), next_token_logits=None,
            sampling_info=None, draft_input=None, prefix_lens=torch.full((BS,), 20), bs=BS)
        return {"bonus": bonus.tolist(), "accept_len": accept_len.tolist()}

    return lambda rnd: forward(body, worker, batch, rnd)


ROUNDS = {"eagle3": _eagle, "dspark": _dspark, "dflash": _dflash}
WORKERS = {"identity": identity}
