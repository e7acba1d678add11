"""The vLLM plugin on vLLM 0.33.0's real groups, gloo, 2/4/8 ranks (tp n/2 x pp 2, one replica).

    .venv/bin/python benchmarks/bench_plugin_vllm.py [--iters 100] [--live 64] [--worlds 2,4,8]

Per world size, one run (plugin loaded by vLLM's loader, groups built by vLLM's
initialize_model_parallel) measures side by side, alternating every iteration, one step's
collectives after sampling:
- vLLM's own PP relay: PPHandler's three broadcasts from the last PP rank down each PP column
  (sampled tokens [R, K+1] int64, num_sampled/num_rejected [2, R] int32, drafts [R, K] int64)
  on vLLM's pp coordinator (world 2: tp 2, pp 1, so there is no relay and no baseline);
- the plugin's step: the accept converged over the replica (every rank, TP peers included)
  and the drafts converged at propose (written back into the drafts the stage keeps), each
  one guarded collective (the plan's default relay `broadcast`: the earlier stages take part
  in the same collective; at world 2 there is no PP, so no vLLM baseline);
reported as median microseconds per step on rank 0 and the ratio. Also the start-up check +
bind at each world size and the hooks installed with SPECPLAN_PLAN unset (must be 0).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace as NS

from shared import launch_bench, start

import vllm_workers  # tests/engines, which shared puts on sys.path
K = 3

SPEC = """
name: bench-vllm-{n}
engine: vllm
topology: {{tp: {tp}, pp: {pp}, device: cpu}}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: eagle3, num_steps: 3, sampling: sampling}}
runtime: {{max_batch: 256, timeout_s: 120}}
"""


def _batch(rows: int):
    import numpy as np
    import torch

    cu = torch.arange(0, rows * (K + 1) + 1, K + 1, dtype=torch.int32)
    return NS(num_reqs=rows, req_ids=None, cu_num_logits=cu, num_computed_tokens_np=np.full(rows, 20),
              prefill_len_np=np.full(rows, 10), num_scheduled_tokens=np.full(rows, K + 1),
              max_seq_len_np=None, is_prefilling_np=np.zeros(rows, dtype=bool))


def bench(tp: str, pp: str, iters: str, live: str) -> dict:
    """One rank: vLLM's groups with the plugin, then time vLLM's relay and the plugin's step."""
    tp, pp, iters, live = map(int, (tp, pp, iters, live))
    import vllm_harness
    import torch
    import torch.distributed as dist

    from specplan.plugins import common

    t0 = time.perf_counter()
    ps = vllm_harness.start_engine(tp, pp, 1, {"method": "eagle3", "num_speculative_tokens": K})
    active = next(iter(common._ACTIVE.values()))
    bridge = active.bridge
    group = ps.get_pp_group()
    batch = _batch(live)
    sampled = torch.randint(0, 1000, (live, K + 1))
    num = torch.full((live,), 2, dtype=torch.int32)
    drafts = torch.randint(0, 1000, (live, K))

    def engine_step():
        for t in (sampled.clone(), torch.stack((num, num)), drafts.clone()):
            dist.broadcast(t, src=group.last_rank, group=group.device_group)

    def plugin_step():
        if bridge.last_stage:
            bridge.accept_last(sampled.clone(), num.clone(), num.clone(), batch)
            if pp > 1:
                bridge.send_sampled(sampled.clone(), num.clone(), batch)
            kept = drafts.clone()
            bridge.converge_drafts(kept, batch)  # at propose: the stage keeps the source's drafts
            if pp > 1:
                bridge.send_drafts(kept)
        else:
            bridge.recv_sampled(batch, K + 1, batch.num_scheduled_tokens > 0)
            bridge.recv_drafts(live)

    steps = {"plugin": plugin_step} | ({"engine": engine_step} if pp > 1 else {})
    times = {k: [] for k in steps}
    for i in range(iters + 5):
        for name, fn in steps.items():
            dist.barrier(group=ps.get_world_group().cpu_group)
            s = time.perf_counter()
            fn()
            if i >= 5:
                times[name].append(time.perf_counter() - s)
    out = {k: statistics.median(v) * 1e6 for k, v in times.items()}
    out["startup_s"] = active.startup_s
    out["total_start_s"] = time.perf_counter() - t0
    return out


def unset_hooks(root: str) -> int:
    """Hooks installed by load_general_plugins with SPECPLAN_PLAN unset (in this process)."""
    import vllm_harness

    os.environ.pop("SPECPLAN_PLAN", None)
    vllm_harness.install(root)
    from vllm.plugins import load_general_plugins
    import vllm.distributed.parallel_state as ps

    load_general_plugins()
    return int(getattr(ps.initialize_model_parallel, "__specplan__", False))


def main(argv: list[str] | None = None) -> None:
    args, worlds, root = start(argv, vllm_workers, bench, "vllm", "worlds", "2,4,8", iters=100)
    tmp = Path(tempfile.mkdtemp())
    for n in worlds:
        tp, pp = (n, 1) if n == 2 else (n // 2, 2)
        env = {"VLLM_USE_V2_MODEL_RUNNER": "1", "CUDA_VISIBLE_DEVICES": ""}
        res = launch_bench(n, tmp / str(n), SPEC.format(n=n, tp=tp, pp=pp), root, tp, pp, args.iters,
                           args.live, module="bench_plugin_vllm", env=env, timeout=1500)
        r0 = res[0].result or {"error": res[0].stderr[-800:]}
        ratio = r0["engine"] / r0["plugin"] if "engine" in r0 else None
        print(f"world {n} (tp {tp} x pp {pp}), {args.live} rows: {json.dumps(r0)}"
              + (f"; vLLM 3 broadcasts / plugin = {ratio:.2f}" if ratio else ""), flush=True)
    print(f"hooks with SPECPLAN_PLAN unset: {unset_hooks(root)}")


if __name__ == "__main__":
    main()
