"""The SGLang plugin on SGLang 0.5.23's real code, gloo, 2/4/8 ranks (tp n, one replica).

    .venv/bin/python benchmarks/bench_plugin_sglang.py [--iters 200] [--live 64] [--worlds 2,4,8]

Per world size, one run (plugin loaded by SGLang's loader, groups built by SGLang's
initialize_model_parallel) measures side by side, alternating every iteration:
- SGLang's own DSpark accept: the three unhooked `SpecTpSync.sync` broadcasts (correct_len,
  bonus, cap_trim_lens) over SGLang's attn_tp coordinator;
- the plugin's one guarded collective for the same accept (`rt.converge` of the plan's
  dspark_accept_sample boundary, on the communicator adopted from SGLang);
reported as median microseconds per round on rank 0 and the ratio three / one; likewise
DSpark's draft: SGLang's gamma (3) per-step DSPARK_DRAFT broadcasts of a [live] column against
the plugin's one guarded collective of the [live, 3] block (plan policy all). Also: the
start-up check (compare every family and setting, then raise or not) at each world size,
the bind on SGLang's groups, and the hooks installed with SPECPLAN_PLAN unset (must be 0).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from shared import ENGINES, first_rank, launch_bench, sglang_server_args, sglang_spec, start

import sglang_workers  # tests/engines, which shared puts on sys.path

SPECULATIVE = sglang_server_args("dspark")


def bench(n: str, iters: str, live: str) -> dict:
    """One rank: start SGLang's groups with the plugin, then time both accepts."""
    n, iters, live = int(n), int(iters), int(live)
    import torch
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.speculative.spec_tp_sync import SpecTpSync, SpecTpSyncSite

    from sglang_workers import start_engine
    from specplan.plugins import common, startup_check

    widths = dict(tp_size=n, pp_size=1, attn_dp_size=1, attn_cp_size=1, attn_tp_size=n, moe_ep_size=1,
                  moe_dp_size=1, moe_tp_size=n, attn_dcp_size=1, shared_experts_tp_size=None)
    start_engine(widths, SPECULATIVE)
    active = next(iter(common._ACTIVE.values()))
    rt, rank = active.runtime, int(os.environ["RANK"])
    tp_sync = SpecTpSync(get_parallel().attn_tp_group)
    engine_sync = SpecTpSync.sync.__wrapped__  # SGLang's own, under the plugin's hook
    site = SpecTpSyncSite.DSPARK_ACCEPT_SAMPLE
    tensors = [torch.full((live,), rank, dtype=torch.int32), torch.full((live,), rank, dtype=torch.int64),
               torch.zeros(live, dtype=torch.int32)]
    names = ("correct_len_sample", "bonus_sample", "cap_trim_lens_sample")
    steps = [torch.full((live,), rank + s, dtype=torch.int64) for s in range(3)]
    block = torch.stack(steps, dim=1)
    three, one, gamma, block_one = [], [], [], []
    for i in range(iters + 20):
        t0 = time.perf_counter()
        for t in tensors:
            engine_sync(tp_sync, site, t)
        t1 = time.perf_counter()
        rt.converge("dspark_accept_sample", dict(zip(names, tensors)), round=i, live_rows=live)
        t2 = time.perf_counter()
        for t in steps:
            engine_sync(tp_sync, SpecTpSyncSite.DSPARK_DRAFT, t)
        t3 = time.perf_counter()
        rt.converge("dspark_draft", {"draft_tokens": block}, round=i, live_rows=live)
        t4 = time.perf_counter()
        if i >= 20:
            three.append(t1 - t0)
            one.append(t2 - t1)
            gamma.append(t3 - t2)
            block_one.append(t4 - t3)
    checks = []
    for _ in range(50):
        t0 = time.perf_counter()
        startup_check(active, active.engine_groups, {}, rank=rank)
        checks.append(time.perf_counter() - t0)
    out = {"three_us": statistics.median(three) * 1e6, "one_us": statistics.median(one) * 1e6,
           "gamma_us": statistics.median(gamma) * 1e6, "block_us": statistics.median(block_one) * 1e6,
           "check_ms": statistics.median(checks) * 1e3, "hook_check_ms": active.startup_s["check"] * 1e3,
           "bind_ms": active.startup_s["bind"] * 1e3}
    return out


def main(argv: list[str] | None = None) -> None:
    args, worlds, root = start(argv, sglang_workers, bench, "sglang", "worlds", "2,4,8")
    from tests.ranks import launch

    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false"}
    [unset] = launch(1, "plugins", root, module="sglang_workers", path=(ENGINES,),
                     env=dict(env, SPECPLAN_PLAN=""), timeout=600)
    print(f"hooks installed with SPECPLAN_PLAN unset: {len(unset.result['hooks'])}")
    print(f"{'ranks':>5} {'3x SpecTpSync us':>17} {'plugin 1x us':>13} {'ratio':>6} "
          f"{'check ms':>9} {'bind ms':>8} {'3x draft us':>12} {'plugin 1x us':>13} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in worlds:
            spec = sglang_spec(f"bench-plugin-tp{n}", f"tp: {n}", "dspark")
            r0 = first_rank(launch_bench(n, Path(tmp) / f"tp{n}", spec, root, n, args.iters,
                                         args.live, module="bench_plugin_sglang", env=env), f"tp{n}")
            print(f"{n:>5} {r0['three_us']:>17.1f} {r0['one_us']:>13.1f} "
                  f"{r0['three_us'] / r0['one_us']:>6.2f} {r0['check_ms']:>9.3f} {r0['bind_ms']:>8.1f} "
                  f"{r0['gamma_us']:>12.1f} {r0['block_us']:>13.1f} {r0['gamma_us'] / r0['block_us']:>6.2f}")


if __name__ == "__main__":
    main()
