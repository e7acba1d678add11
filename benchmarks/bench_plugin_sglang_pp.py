"""The SGLang plugin's PP relay on SGLang 0.5.23's own transport, gloo, pp 2 x tp 1/2/4.

    .venv/bin/python benchmarks/bench_plugin_sglang_pp.py [--iters 200] [--live 64] [--tps 1,2,4]

Per tp width, one run (plugin loaded by SGLang's loader, groups built by SGLang's
initialize_model_parallel, the plan relaying ring) measures side by side, alternating every
iteration, one decode round's output message from the last stage to stage 0 with SGLang's
`GroupCoordinator.send_tensor_dict` / `recv_tensor_dict` over its pp group (tensors split
over attn_tp and gathered, as the scheduler sends them):
- SGLang's own dict: next_token_ids, spec_accept_lens, spec_new_seq_lens, spec_bonus_tokens,
  spec_accept_index, spec_next_chain for `live` rows of an EAGLE chain (3 steps);
- the same dict with the plugin's two relays (`relay_out` of eagle_accept and eagle_draft on
  the last stage, `relay_in` of both on stage 0: header, batch digest and the decisions).
Reported: median microseconds per round on stage 0's first rank (receive + checks), and the
ratio relay / plain.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from shared import first_rank, launch_bench, sglang_server_args, sglang_spec, start

import sglang_workers  # tests/engines, which shared puts on sys.path

SPECULATIVE = sglang_server_args("eagle")


def bench(n: str, iters: str, live: str) -> dict:
    """One rank: SGLang's groups with the plugin, then time both messages (stage 0 receives)."""
    n, iters, live = int(n), int(iters), int(live)
    import torch
    import sglang.srt.distributed.parallel_state as ps

    from sglang_workers import start_engine
    from specplan.plugins import common
    from specplan.runtime.batch import Batch
    from test_sglang_plugin import widths

    start_engine(widths(tp=n, pp=2), SPECULATIVE)
    rt = next(iter(common._ACTIVE.values())).runtime
    pp, attn_tp = ps._PP, ps._ATTN_TP
    k = 4
    rows = Batch(list(range(live)), [0] * live)
    correct = torch.full((live,), 2, dtype=torch.int32)
    index = (torch.arange(live)[:, None] * k + torch.arange(k)).to(torch.int32)
    accept = {"predict": torch.arange(live * k, dtype=torch.int32), "accept_index": index,
              "num_correct_drafts": correct}
    draft = {"draft_tokens": torch.arange(live * (k - 1), dtype=torch.int64).view(live, k - 1)}
    plain = {"next_token_ids": accept["predict"], "spec_accept_lens": correct + 1,
             "spec_new_seq_lens": torch.full((live,), 20), "spec_bonus_tokens": correct,
             "spec_accept_index": index, "spec_next_chain": torch.arange(live * k), "__msg_type__": "output"}
    timings = {"plain": [], "relay": []}
    for i in range(iters + 20):
        for kind in ("plain", "relay"):
            tensors = dict(plain)
            t0 = time.perf_counter()
            if pp.is_last_rank:
                if kind == "relay":
                    tensors["specplan.eagle_accept"] = rt.relay_out("eagle_accept", accept, round=i,
                                                                    live_rows=live, requests=rows)
                    tensors["specplan.eagle_draft"] = rt.relay_out("eagle_draft", draft, round=i + 1,
                                                                   live_rows=live, requests=rows)
                pp.send_tensor_dict(tensors, all_gather_group=attn_tp)
            else:
                got = pp.recv_tensor_dict(all_gather_group=attn_tp)
                if kind == "relay":
                    rt.relay_in("eagle_accept", got["specplan.eagle_accept"], round=i, live_rows=live,
                                requests=rows)
                    rt.relay_in("eagle_draft", got["specplan.eagle_draft"], round=i + 1, live_rows=live,
                                requests=rows)
            if i >= 20:
                timings[kind].append(time.perf_counter() - t0)
    out = {kind: statistics.median(v) * 1e6 for kind, v in timings.items()}
    out["relay_bytes"] = int(sum(rt.relay_out(s, v, round=0, live_rows=live).numel()
                                 for s, v in (("eagle_accept", accept), ("eagle_draft", draft))))
    return out


def main(argv: list[str] | None = None) -> None:
    args, tps, root = start(argv, sglang_workers, bench, "sglang", "tps", "1,2,4")
    env = {"SGLANG_USE_MESSAGE_QUEUE_BROADCASTER": "false"}
    print(f"{'ranks':>5} {'SGLang msg us':>14} {'+ relays us':>12} {'ratio':>6} {'relay bytes':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in tps:
            spec = sglang_spec(f"bench-pp-tp{n}", f"tp: {n}, pp: 2", "eagle")
            results = launch_bench(2 * n, Path(tmp) / f"tp{n}", spec, root, n, args.iters,
                                   args.live, module="bench_plugin_sglang_pp", env=env)
            r0 = first_rank(results, f"tp{n}")  # stage 0's first rank: the receiver
            print(f"{2 * n:>5} {r0['plain']:>14.1f} {r0['relay']:>12.1f} "
                  f"{r0['relay'] / r0['plain']:>6.2f} {r0['relay_bytes']:>12}")


if __name__ == "__main__":
    main()
