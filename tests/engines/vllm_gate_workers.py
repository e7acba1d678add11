"""Rank programs for vLLM's step gate: vLLM 0.33.0's own sync_cudagraph_and_dp_padding over
the real DP group on gloo (run like vllm_workers.py). Stubbed: only the CUDA-graph manager's
lookup of captured sizes (graphs need a GPU), which pads to the next of 8, 16, 32 tokens.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_workers  # noqa: E402

SIZES = (8, 16, 32)


def main(argv: list[str]) -> None:
    vllm_workers.WORKERS.update(WORKERS)
    vllm_workers.main(argv)


class Captured:
    """CudaGraphManager.dispatch as a FULL graph of the next captured size."""

    def dispatch(self, num_reqs, num_tokens, uniform_token_count, **kwargs):
        from vllm.config.compilation import CUDAGraphMode
        from vllm.v1.worker.gpu.cudagraph_utils import BatchExecutionDescriptor

        size = next(s for s in SIZES if s >= num_tokens)
        return BatchExecutionDescriptor(cg_mode=CUDAGraphMode.FULL, num_tokens=size, num_reqs=num_reqs)


def dp_step(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """One step's descriptor on each DP rank from its own batch: rank r schedules 3 + 8 r
    tokens; `fault` "eager:<rank>": that rank alone wants eager."""
    import vllm_harness
    from vllm.config.compilation import CUDAGraphMode
    from vllm.v1.worker.gpu.dp_utils import sync_cudagraph_and_dp_padding

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative))
    active = next(iter(common._ACTIVE.values()), None)
    me = ps.get_dp_group().rank_in_group
    manager = Captured()
    tokens = 3 + 8 * me
    desired = manager.dispatch(1, tokens, None)
    if fault == f"eager:{me}":
        desired = type(desired)(cg_mode=CUDAGraphMode.NONE, num_tokens=tokens, num_reqs=1)
    desc, sync = sync_cudagraph_and_dp_padding(manager, desired, tokens, 1, None, int(dp), me)
    ps.get_world_group().barrier()
    return {"hooks": list(active.hooks) if active else [], "own": desired.num_tokens,
            "mode": desc.cg_mode.name, "tokens": desc.num_tokens,
            "across": [int(x) for x in sync.num_tokens_across_dp], "eager": sync.eager}


WORKERS = {"dp_step": dp_step}


def _rank() -> int:
    return int(os.environ["RANK"])


def stage_step(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """One target step's dispatch on every rank of a tp x dp stage, through vLLM's own
    dispatch_cg_and_sync_dp (which calls sync_cudagraph_and_dp_padding over its DP group).
    DP rank d schedules 3 + 8 d tokens on each of its TP ranks, as its one SchedulerOutput says;
    `fault` "eager:<rank>": that rank alone must run eager (need_eager, as a rank whose step
    skips compilation); "tokens:<rank>": that rank's batch holds 20 more tokens than its TP
    peers' (a per-rank divergence of the step's input)."""
    import vllm_harness
    from vllm.v1.worker.gpu.dp_utils import dispatch_cg_and_sync_dp

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative))
    active = next(iter(common._ACTIVE.values()), None)
    me = ps.get_dp_group().rank_in_group
    tokens = 3 + 8 * me + (20 if fault == f"tokens:{_rank()}" else 0)
    desc, sync = dispatch_cg_and_sync_dp(Captured(), 1, tokens, None, int(dp), me,
                                         need_eager=fault == f"eager:{_rank()}")
    ps.get_world_group().barrier()
    return {"hooks": list(active.hooks) if active else [], "rank": _rank(),
            "tp_rank": ps.get_tp_group().rank_in_group, "mode": desc.cg_mode.name,
            "tokens": desc.num_tokens, "across": [int(x) for x in sync.num_tokens_across_dp]}


def shard_owner(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """vLLM's real BatchSharder.shard_sampler_inputs on every TP rank, over a dummy batch of
    four requests in slots 0..3 (InputBatch.make_dummy on CPU buffers); `fault` "slot:<rank>":
    that rank holds its last request in slot 4, as a rank whose slot allocator drifted."""
    import dataclasses
    import inspect
    import types

    import numpy as np
    import torch
    import vllm_harness
    from vllm.v1.worker.gpu.input_batch import InputBatch
    from vllm.v1.worker.gpu.sample.batch_shard import BatchSharder

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative),
                                   enable_batch_sharded_sampling=True)
    active = next(iter(common._ACTIVE.values()), None)
    n = 16
    buffers = types.SimpleNamespace(
        device=torch.device("cpu"), seq_lens=torch.zeros(n, dtype=torch.int32),
        query_start_loc=torch.zeros(n + 1, dtype=torch.int32), input_ids=torch.zeros(n, dtype=torch.int64),
        positions=torch.zeros(n, dtype=torch.int64), is_padding=torch.zeros(n, dtype=torch.bool))
    batch = InputBatch.make_dummy(4, 8, buffers)
    slots = np.array([0, 1, 2, 4 if fault == f"slot:{_rank()}" else 3], dtype=np.intp)
    batch = dataclasses.replace(batch, idx_mapping_np=slots, idx_mapping=torch.from_numpy(slots).to(torch.int64))
    extra = ({"adaptive_verification_enabled": False}  # 0.33.0's; 0.32.x has no such argument
             if "adaptive_verification_enabled" in inspect.signature(BatchSharder).parameters else {})
    sharder = BatchSharder(max_num_reqs=8, max_num_logits_per_req=4, device=torch.device("cpu"), **extra)
    _, _, _, meta = sharder.shard_sampler_inputs(batch, None)
    ps.get_world_group().barrier()
    return {"hooks": list(active.hooks) if active else [], "rank": _rank(),
            "splits": list(meta.num_logits_per_rank), "local": meta.num_local_reqs}


WORKERS.update({"stage_step": stage_step, "shard_owner": shard_owner})
