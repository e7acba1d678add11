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
