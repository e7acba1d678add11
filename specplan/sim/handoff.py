"""One rank of a simulated disaggregated deployment: `python -m specplan.sim.handoff SIM_DIR`.

Ranks 0..P-1 are the prefill instance, P..P+D-1 the decode instance, all in one gloo world
(RANK, WORLD_SIZE = P + D, MASTER_*). The handoff happens in that world:

1. every rank creates the prefill instance's model groups (tp, attn_tp, pp, moe_*) as
   subgroups of the world (new_group is collective: all P + D ranks, one order);
2. each prefill rank runs the sim's tiny model over every prompt with its own shard (TP
   heads, PP stage) and keeps each layer's K/V;
3. it sends, point-to-point, exactly the transfers the planned handoff lists (sim.json
   `transfers`, written by specplan.deploy.simulate from `kv_handoff`): for one decode rank,
   the KV of the layers it receives by global id (target layers, then draft layers) and the
   KV heads [lo, hi) it holds, of the prompts of the requests it serves; the last prefill
   stage also sends the first token and the drafter's context (taps or last hidden) of each
   prompt's last position;
4. the decode ranks write what they received into their KV cache (every layer and head they
   hold must be covered, else a LayoutMismatch names the hole).

Then the world is left, and the decode ranks bind the decode plan in the decode instance's
own world (the runtime binds a plan to a world of the plan's size, as a real decode instance
does) and run speculative decode rounds from that KV, exactly as `specplan simulate SPEC`
runs them. The prefill side runs the model and the handoff only, not its plan's converges
(the first token and drafter context come from the last prefill stage's TP rank 0, whose
logits every TP peer of that stage shares after the all-reduce). Each decode rank also compares the KV it received with the prompt's KV computed
on one process (the whole model) and records the first layer that differs (`kv_diff`).

Exit codes and result files (SIM_DIR/rank<R>.json) as specplan.sim.worker's.
"""

from __future__ import annotations

import datetime
import sys
import time
import zlib
from pathlib import Path

import torch
import torch.distributed as dist

from specplan.runtime.comm import new_groups, start_world
from specplan.sim.model import F64, Segment, Shard, causal, run_layers

MODEL_FAMILIES = ("tp", "attn_tp", "pp", "moe_ep", "moe_tp")


class _InstanceRuntime:
    """What the sim engine reads of a runtime, for an instance that runs no converge (the
    prefill side of the handoff): its plan, rank, model groups and replica."""

    def __init__(self, view, rank: int, groups: dict):
        self.plan, self.rank, self.groups = view, rank, groups
        self.ranks = {name: view.group_of(name, rank) for name in view.families}

    @property
    def replica(self) -> int:
        return self.plan.families["replica"].locate(self.rank)[0]


def _gate_families(view) -> list[str]:
    """The families the instance's gates use (their agreement and what they select) that are
    not model families, in a fixed order: created alike on every rank."""
    used = {f for g in view.plan.gates for f in (g.family, *(s.family for s in g.selects)) if f}
    return sorted(used - set(MODEL_FAMILIES))


def _model_groups(view, rank: int, timeout_s: float) -> dict:
    """Every group of the instance's model families, and of the families its gates use,
    created on every rank of the world (over the world's backend)."""
    out = {}
    for name in (*MODEL_FAMILIES, *_gate_families(view)):
        fam = view.families.get(name)
        if fam is None:
            continue
        own = new_groups(fam.groups(), rank, timeout_s)
        if own is not None:
            out[name] = own
    return out


def draft_kv(seed: int, layer: int, tokens: list[int], w: dict, heads: int, head_dim: int):
    """The K/V a drafter registers under draft-layer id `layer` for a prompt: a fixed function
    of (id, tokens), so a receiver can tell which id's KV it got."""
    g = torch.Generator().manual_seed(zlib.crc32(f"draft-kv/{seed}/{layer}".encode()))
    proj = torch.randn(w["embed"].shape[1], 2 * heads * head_dim, generator=g, dtype=F64) * 0.1
    kv = (w["embed"][torch.tensor(tokens)] @ proj).view(len(tokens), 2, heads, head_dim)
    return kv[:, 0], kv[:, 1]


def _with_all_requests(e, requests: list[int]) -> None:
    """The prefill instance computes every request's prompt (each decode rank picks its own)."""
    from specplan.sim.engine import prompt_of
    from specplan.sim.model import KVCache

    e.requests = list(requests)
    e.tokens = [prompt_of(e.sim.seed, q, e.cfg.vocab) for q in e.requests]
    e.prompt_lens = [len(t) for t in e.tokens]
    e.cache_len = [0] * len(e.requests)
    e.cache = KVCache(e.layers, len(e.requests) * e.max_len, e.shard.local_heads(e.cfg),
                      e.cfg.head_dim)


def prefill_side(raw: dict, sim, rank: int, views: dict) -> dict:
    from specplan.sim import gates
    from specplan.sim.engine import Engine

    view = views["prefill"]
    groups = _model_groups(view, rank, view.timeout_s)
    e = Engine(_InstanceRuntime(view, rank, groups), sim)
    gates.run(e, "startup")  # the prefill instance's gates, as `simulate SPEC` runs them
    gates.run(e, "prefill")
    _with_all_requests(e, list(range(sim.requests)))
    counts = e.prompt_lens
    tokens = torch.tensor([x for t in e.tokens for x in t], dtype=torch.int64)
    logits, hidden, taps = e.forward(tokens, e.segments(counts, [causal(n) for n in counts]))
    starts = dict(zip(e.requests, (torch.tensor([0] + counts).cumsum(0)[:-1]).tolist()))
    rows_of = {q: torch.arange(starts[q], starts[q] + n) for q, n in zip(e.requests, counts)}
    works, sent = [], 0
    for t in (t for t in raw["transfers"] if t["src"] == rank):
        payload = _payload(e, t, rows_of)
        works.append(dist.isend(payload, dst=t["dst_world"]))
        sent += payload.numel() * payload.element_size()
    for a in (a for a in raw["aux"] if a["src"] == rank):
        ends = torch.stack([rows_of[q][-1] for q in a["serves"]])
        ctx = e.drafter_ctx(hidden, taps)[ends].contiguous()
        works += [dist.isend(logits[ends].argmax(-1).contiguous(), dst=a["dst_world"]),
                  dist.isend(ctx, dst=a["dst_world"])]
    for w in works:
        assert w is not None  # every rank here is in the world: isend returns its Work
        w.wait(timeout=datetime.timedelta(seconds=view.timeout_s))
    return {"rank": rank, "role": "prefill", "stage": e.stage, "sent_bytes": sent, "error": None}


def _payload(e, t: dict, rows_of: dict) -> torch.Tensor:
    """One transfer: [layers + drafts, K/V, rows of its requests, heads, head_dim]."""
    rows = torch.cat([rows_of[q] for q in t["serves"]])
    head_parts, head_index = e.shard.attn
    my_lo = head_index * (e.cfg.heads // head_parts)
    lo, hi = t["heads"][0] - my_lo, t["heads"][1] - my_lo
    parts = [torch.stack([k[rows, lo:hi], v[rows, lo:hi]])
             for k, v in (e.pending_kv[layer] for layer in t["layers_src"])]
    for layer in t["drafts_src"]:
        kv = [draft_kv(e.sim.seed, layer, e.tokens[e.requests.index(q)], e.w, e.cfg.heads,
                       e.cfg.head_dim) for q in t["serves"]]
        heads = slice(*t["heads"])
        parts.append(torch.stack([torch.cat([k for k, _ in kv])[:, heads],
                                  torch.cat([v for _, v in kv])[:, heads]]))
    return torch.stack(parts).contiguous()


def receive(raw: dict, sim, rank: int, views: dict, cfg) -> dict:
    """Decode side of the handoff: the transfers into this rank, and its aux."""
    from specplan.sim.engine import prompt_of

    _model_groups(views["prefill"], rank, views["prefill"].timeout_s)  # collective: every rank
    me = rank - raw["prefill_world"]
    serves = raw["serves"][str(me)]
    lens = {q: len(prompt_of(sim.seed, q, cfg.vocab)) for q in serves}
    rows = sum(lens[q] for q in serves)
    got, works = [], []
    for t in raw["transfers"]:
        if t["dst"] != me:
            continue
        n = len(t["layers"]) + len(t["drafts"])
        buf = torch.empty(n, 2, rows, t["heads"][1] - t["heads"][0], cfg.head_dim, dtype=F64)
        works.append(dist.irecv(buf, src=t["src"]))
        got.append((t, buf))
    first = torch.empty(len(serves), dtype=torch.int64)
    ctx = torch.empty(len(serves), cfg.drafter_in, dtype=F64)
    aux = next((a for a in raw["aux"] if a["dst"] == me), None)
    if aux is not None:  # none for an idle decode replica
        works += [dist.irecv(first, src=aux["src"]), dist.irecv(ctx, src=aux["src"])]
    _wait_all(works, views["prefill"].timeout_s, f"decode rank {me}: the KV handoff from the "
              "prefill instance")
    return {"transfers": got, "first": first, "ctx": ctx, "serves": serves, "lens": lens}


def _wait_all(works: list, timeout_s: float, what: str) -> None:
    """Wait for every transfer; a peer that ended (a prefill rank failed by name, its own
    divergence) is a CollectiveTimeout naming what did not arrive."""
    from specplan.runtime.errors import CollectiveTimeout

    try:
        for w in works:
            w.wait(timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        raise CollectiveTimeout(f"{what} did not complete: a peer ended or stopped answering "
                                f"({' '.join(str(exc).split())[:200]})") from None


def _reference_kv(cfg, w, prompt: list[int]) -> dict:
    from specplan.sim.model import KVCache

    n = len(prompt)
    layers = range(cfg.num_layers)
    cache = KVCache(layers, n, cfg.heads, cfg.head_dim)
    seg = Segment(slice(0, n), 0, 0, causal(n))
    _, kv, _ = run_layers(w, cfg, Shard(), cache, layers, w["embed"][torch.tensor(prompt)], [seg])
    return kv


def install(e, got: dict) -> dict | None:
    """Write the received KV into the decode engine's cache; first token and drafter state.
    Returns what the report needs: the first layer whose KV differs from the prompt's."""
    from specplan.sim.engine import LayoutMismatch
    from specplan.sim.rounds import _extend

    if e.requests != got["serves"]:
        raise LayoutMismatch(f"decode rank {e.rt.rank} serves requests {e.requests}, the handoff "
                             f"sent it requests {got['serves']}")
    drafts_seen = _write_kv(e, got)
    for b, q in enumerate(e.requests):
        e.cache_len[b] = got["lens"][q]
        e.tokens[b].append(int(got["first"][b]))
    e.commits[0] = [1] * e.bs
    if e.last and not e.lookup:
        e.state["ctx"] = got["ctx"]
        if e.m.extends_drafts:
            _extend(e, got["first"], converge=False)
    return _target_diff(e, got) or _draft_diff(e, got, drafts_seen)


def _my_heads(e) -> slice:
    parts, index = e.shard.attn
    hp = e.cfg.heads // parts
    return slice(index * hp, (index + 1) * hp)


def _write_kv(e, got: dict) -> dict:
    """Each transfer's target layers into the cache slots of its requests' prompts; every
    layer and head this rank holds must be covered. Returns the draft KV by (id, first head)."""
    from specplan.sim.engine import LayoutMismatch

    mine = _my_heads(e)
    covered = {layer: torch.zeros(mine.stop - mine.start, dtype=torch.bool) for layer in e.layers}
    offsets = torch.tensor([0] + [got["lens"][q] for q in e.requests]).cumsum(0).tolist()
    slots = torch.cat([b * e.max_len + torch.arange(got["lens"][q]) for b, q in enumerate(e.requests)]) \
        if e.requests else torch.empty(0, dtype=torch.int64)
    drafts = {}
    for t, buf in got["transfers"]:
        heads = slice(t["heads"][0] - mine.start, t["heads"][1] - mine.start)
        for i, layer in enumerate(t["layers"]):
            e.cache.k[layer][slots, heads] = buf[i, 0, : offsets[-1]]
            e.cache.v[layer][slots, heads] = buf[i, 1, : offsets[-1]]
            covered[layer][heads] = True
        drafts.update({(layer, t["heads"][0]): buf[len(t["layers"]) + j]
                       for j, layer in enumerate(t["drafts"])})
    holes = [layer for layer, c in covered.items() if e.requests and not bool(c.all())]
    if holes:
        raise LayoutMismatch(f"decode rank {e.rt.rank} holds layers {list(e.layers)}, heads "
                             f"{mine.start}..{mine.stop - 1}, but no prefill rank sent layer(s) "
                             f"{holes} (or some of their heads)")
    return drafts


def _target_diff(e, got: dict) -> dict | None:
    """The first target layer whose received K is not the prompt's (computed on one process)."""
    heads = _my_heads(e)
    for b, q in enumerate(e.requests):
        ref = _reference_kv(e.cfg, e.w, e.tokens[b][: got["lens"][q]])
        slots = b * e.max_len + torch.arange(got["lens"][q])
        wrong = [layer for layer in e.layers
                 if not torch.allclose(e.cache.k[layer][slots], ref[layer][0][:, heads], rtol=0, atol=1e-9)]
        if wrong:
            have = e.cache.k[wrong[0]][slots]
            like = [i for i in range(e.cfg.num_layers)
                    if torch.allclose(have, ref[i][0][:, heads], rtol=0, atol=1e-9)]
            return {"layer": wrong[0], "kind": "target", "request": q,
                    "looks_like": like[0] if like else None}
    return None


def _draft_diff(e, got: dict, drafts_seen: dict) -> dict | None:
    """The first draft layer whose received K is not the KV its id names."""
    starts = torch.tensor([0] + [got["lens"][q] for q in e.requests]).cumsum(0).tolist()
    for (layer, lo), buf in sorted(drafts_seen.items()):
        for b, q in enumerate(e.requests):
            k, _ = draft_kv(e.sim.seed, layer, e.tokens[b][: got["lens"][q]], e.w, e.cfg.heads,
                            e.cfg.head_dim)
            got_k = buf[0, starts[b]:starts[b + 1]]
            if not torch.allclose(got_k, k[:, lo:lo + buf.shape[2]], rtol=0, atol=1e-9):
                return {"layer": layer, "kind": "draft", "request": q, "looks_like": None}
    return None


def decode_side(raw: dict, sim, rank: int, views: dict, got_fn) -> dict:
    from specplan.runtime import bind
    from specplan.sim import gates, rounds
    from specplan.sim.engine import Engine
    from specplan.sim.worker import decode_rounds, decoded

    me = rank - raw["prefill_world"]
    start_world(views["decode"].backend, me, raw["decode_world"], views["decode"].timeout_s,
                init_method=f"tcp://127.0.0.1:{raw['decode_port']}")
    t_bind = time.perf_counter()
    rt = bind(raw["plans"]["decode"], device="cpu")  # the plan keeps the spec's device
    e = Engine(rt, sim)
    rounds.startup(e)
    gates.run(e, "startup")  # its decode gates run in the first round (sim/worker.py); a decode
    diff = install(e, got_fn)  # instance prefills nothing: the KV is handed over
    started, elapsed = decode_rounds(e, sim, me)
    rt.close()
    return {**decoded(e, me, elapsed, bind_s=started - t_bind), "role": "decode", "kv_diff": diff}


def run(sim_dir: Path, rank: int) -> dict:
    from specplan.runtime.plan_view import PlanView
    from specplan.sim.worker import _config

    torch.set_num_threads(1)
    raw, sim = _config(sim_dir)
    views = {role: PlanView(path) for role, path in raw["plans"].items()}
    start_world(views["prefill"].backend, rank, raw["prefill_world"] + raw["decode_world"],
                views["prefill"].timeout_s)
    if rank < raw["prefill_world"]:
        out = prefill_side(raw, sim, rank, views)
        _wait_all([dist.barrier(async_op=True)], views["prefill"].timeout_s,
                  f"prefill rank {rank}: leaving the handoff's world")
        dist.destroy_process_group()
        return out
    got = receive(raw, sim, rank, views, sim.model)
    dist.barrier()
    dist.destroy_process_group()
    return decode_side(raw, sim, rank, views, got)


def main(argv: list[str]) -> None:
    from specplan.sim.worker import rank_main

    rank_main(argv, run)


if __name__ == "__main__":
    main(sys.argv[1:])
