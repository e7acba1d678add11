"""Rank programs for the SGLang plugin's gates: SGLang 0.5.23's own SpecTpSync and
get_available_gpu_memory on gloo, the plugin loaded by SGLang's loader. Run like
sglang_workers.py. Stubbed: only the host's free-memory reading (the GPU's, on a GPU), which
reads 40 + rank GiB here so that the ranks differ as free memory does.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sglang_workers  # noqa: E402


def main(argv: list[str]) -> None:
    sglang_workers.WORKERS.update(WORKERS)
    sglang_workers.main(argv)


def memory(topology: str, speculative: str) -> dict:
    """DSparkWorkerV2.init_cuda_graphs' reading: SpecTpSync built on get_dp_tp_group(), asked
    for DSPARK_MEM over the draft's graph group (a MoE draft under DP-attention: the whole TP
    group, parallel.tp_group)."""
    import torch.distributed as dist
    import sglang.srt.utils.common as common
    from sglang.srt.layers.dp_attention import get_dp_tp_group
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.speculative.spec_tp_sync import SpecTpSync, SpecTpSyncSite

    out = sglang_workers.start_engine(json.loads(topology), json.loads(speculative))
    rank = int(os.environ["RANK"])
    common.get_free_cpu_memory = lambda: (40 + rank) * (1 << 30)
    common.get_cpu_ids_by_node = lambda: [[0]]
    sync = SpecTpSync(get_dp_tp_group())
    got = sync.available_memory_gb(SpecTpSyncSite.DSPARK_MEM, "cpu", 0, group=get_parallel().tp_group)
    dist.barrier()  # no rank leaves while a peer still talks to it
    return dict(out, memory=got, sync_group=list(get_dp_tp_group().ranks))


WORKERS = {"memory": memory}


if __name__ == "__main__":
    main(sys.argv[1:])
