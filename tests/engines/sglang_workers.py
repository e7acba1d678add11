"""Rank programs for the SGLang plugin tests: SGLang's own code on gloo, the plugin loaded by
SGLang's own loader. Run by tests/ranks.py's launch (one process per rank, torchrun's env),
each reporting by its protocol: `RESULT <json>`, `REFUSED <the one line>` (the plugin refused
the start) or a traceback and `ERROR internal`.
"""

from __future__ import annotations

import json
import os
import sys

from tests.ranks import serve_engine


def main(argv: list[str]) -> None:
    """argv: the worker, the wheel's root, the worker's arguments (tests/ranks.py's protocol)."""
    serve_engine(WORKERS, argv, "sglang_harness")


def start_engine(topology: dict, speculative: dict) -> dict:
    """What SGLang's scheduler does first: plugins, server args, the process groups."""
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry
    from sglang.srt.runtime_context import get_context, get_parallel
    import sglang.srt.distributed.parallel_state as ps

    load_plugins()
    hooks = sorted(t for t, hs in HookRegistry._hooks.items()
                   if any(src and src.plugin_name == "specplan" for _, _, src in hs))
    get_context().override_server_args(**speculative).install()
    get_parallel().override_permanently(**topology)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    ps.init_distributed_environment(
        backend="gloo", world_size=world, rank=rank, local_rank=rank,
        distributed_init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}")
    ps.initialize_model_parallel(backend="gloo")
    return {"hooks": hooks, "tp": ps._TP.ranks, "attn_tp": ps._ATTN_TP.ranks}


def startup(topology: str, speculative: str) -> dict:
    out = start_engine(json.loads(topology), json.loads(speculative))
    from specplan.plugins import common

    active = next(iter(common._ACTIVE.values()), None)
    rt = active.runtime if active else None
    out["bound"] = None
    if rt is not None:  # the first boundary over the replica: its source on this rank
        first = next(b for b in rt.plan.boundaries if b.family == "replica")
        out["bound"] = {"replica": rt.ranks["replica"], "source": rt.ranks["replica"][first.source_member]}
    import torch.distributed as dist

    dist.barrier()  # no rank leaves while a peer still builds a group with it
    return out


def accept(topology: str, speculative: str, group: str, site: str) -> dict:
    """DSpark's real build_accept_outs with this rank's own accept; what each rank ends with."""
    import torch
    from sglang.srt.runtime_context import get_parallel
    from sglang.srt.speculative.dspark_components.dspark_verify import build_accept_outs
    from sglang.srt.speculative.spec_tp_sync import SpecTpSync, SpecTpSyncSite

    out = start_engine(json.loads(topology), json.loads(speculative))
    if group == "dp_tp":  # what SGLang's DSpark worker passes: attn_tp under DP-attention
        from sglang.srt.layers.dp_attention import get_dp_tp_group

        tp_sync = SpecTpSync(get_dp_tp_group())
    else:
        tp_sync = SpecTpSync(getattr(get_parallel(), group))
    rank, bs, gamma = int(os.environ["RANK"]), 4, json.loads(speculative)["speculative_num_steps"]
    rounds = []
    for rnd in range(3):  # three decode rounds: the guard header's round advances
        mine = (rank * 10 + rnd) % 7  # differs on every rank (a rank's own sampled accept)
        correct_len = torch.full((bs,), mine % (gamma + 1), dtype=torch.int32)
        bonus = torch.full((bs,), 100 + rank * 10 + rnd, dtype=torch.int64)
        cap_trim = torch.zeros(bs, dtype=torch.int32)
        res = build_accept_outs(
            correct_len=correct_len, bonus=bonus, cap_trim_lens=cap_trim,
            prefix_lens=torch.full((bs,), 20, dtype=torch.int32),
            draft_tokens=torch.arange(bs * gamma, dtype=torch.int64).reshape(bs, gamma),
            gamma=gamma, verify_num_draft_tokens=gamma + 1, tp_sync=tp_sync,
            sync_site=SpecTpSyncSite[site])
        rounds.append({"correct_len": res.correct_len.tolist(), "bonus": res.bonus.tolist(),
                       "commit_lens": res.commit_lens.tolist(), "new_seq_lens": res.new_seq_lens.tolist()})
    torch.distributed.barrier()  # no rank leaves while a peer still talks to it
    return dict(out, rounds=rounds)


def plugins(dist_dir: str = "") -> dict:
    """Only SGLang's plugin loader: which hooks specplan registered, what it imported."""
    if dist_dir:  # another installed sglang version, found first
        sys.path.insert(0, dist_dir)
    from sglang.srt.plugins import load_plugins
    from sglang.srt.plugins.hook_registry import HookRegistry

    before = set(sys.modules)
    load_plugins()
    imported = sorted(m for m in set(sys.modules) - before if m.startswith("specplan"))
    from specplan.plugins.sglang import register

    register()  # a second call (vLLM-style repeated loading) must add nothing
    counts = {t: len(hs) for t, hs in HookRegistry._hooks.items()}
    return {"hooks": sorted(counts), "per_target": sorted(set(counts.values())), "imported": imported}


WORKERS = {"startup": startup, "accept": accept, "plugins": plugins}
