"""Each method's prefill and decode round on the sim engine (reference/decisions.md §1-§4).

Root of every verify = the last committed token (its K/V not yet cached); nodes sit at
cache_len + depth. The last stage drafts, verifies and accepts; `Engine.decide` makes every
rank of the replica hold the source's decisions; every rank then commits the same rows.
"""

from __future__ import annotations

import time

import torch

from specplan.plan import ABSENT

from specplan.runtime.kernels import (build_tree, finalize_accept, greedy_accept,
                                      tree_sample_target_only, verify_tree_greedy)
from specplan.sim import faults
from specplan.sim.drafter import chain, chain_tree, eagle_chain, eagle_tree, ngram_lookup, topk_proposal
from specplan.sim.engine import Engine, coins
from specplan.sim.model import causal

Tree = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # retrieve_index, next_token, next_sibling


def startup(e: Engine) -> None:
    """The free-memory MIN sites (DFlash, DSpark) once, before the prefill. Each rank reads its
    own number; the probe does not hold it: what the reading selects (the draft's graph
    capture) is the plan's gate, which sim/gates.py runs, so a reading that selects nothing
    (no capture: --disable-cuda-graph, a CPU) may differ as check's WARN says, and one that
    selects a capture over a wider group fails by the gate's name under --inject gate."""
    for name, site in e.view.sites.items():
        if site.round == "startup":
            out = e.decide(name, {"free_mem_gb": torch.tensor(40.0 + e.rt.rank, dtype=torch.float32)})
            for decision in out:
                e.held.pop(decision, None)


def _skips(e: Engine) -> bool:
    """An idle DP rank under `sync.idle_ranks: skip` runs nothing this round (its rank class's
    idle program): no forward, so none of the MoE and MLP collectives its peers wait in."""
    return not e.requests and any(c.idle_program is not ABSENT for c in e.view.plan.rank_classes)


def prefill(e: Engine) -> None:
    e.round = 0
    if _skips(e):
        return
    counts = [len(t) for t in e.tokens]
    tokens = torch.tensor([x for t in e.tokens for x in t], dtype=torch.int64)
    logits, hidden, taps = e.forward(tokens, e.segments(counts, [causal(n) for n in counts]))
    ends = torch.tensor(counts, dtype=torch.int64).cumsum(0) - 1
    values, name = None, _target_decision(e)
    if e.last:
        values = {name: e.sample_or_argmax(logits[ends], counts)}
    first = e.decide(f"{e.method}_target", values)[name]
    e.commit_rows([torch.arange(int(ends[b]) - n + 1, int(ends[b]) + 1) for b, n in enumerate(counts)],
                  [[int(t)] for t in first])
    if e.last and not e.lookup:
        e.state["ctx"] = e.drafter_ctx(hidden, taps)[ends]
        if e.m.extends_drafts:
            _extend(e, first, converge=False)
    e.probe()


def _extend(e: Engine, bonus: torch.Tensor, converge: bool = True) -> None:
    """The draft extend: the next round's level-0 proposal from (bonus, context)."""
    t0 = time.perf_counter()
    ctx = e.state["ctx"]
    index, p, hidden = topk_proposal(e.head, bonus, ctx, e.topk)
    e.state["head_hidden"] = hidden
    e.timers["draft"] += time.perf_counter() - t0
    if converge:
        out = e.decide(f"{e.method}_draft_extend", {"topk_index": index, "topk_p": p})
        index, p = out["topk_index"], out["topk_p"]
    e.state["proposal"] = (index, p)


def decode(e: Engine) -> None:
    if _skips(e):
        return
    if not e.sim.spec or e.m.round == "plain":
        _plain(e)
    elif e.m.round == "draft_verify":
        _eagle_round(e)
    else:
        _block_round(e)
    e.probe()


def _target_decision(e: Engine) -> str:
    """The target site's token (`next_token_ids` for every method: method none's decode
    step and the speculative methods' prefill)."""
    return e.view.sites[f"{e.method}_target"].decisions[0].name


def _root(e: Engine) -> torch.Tensor:
    return torch.tensor([t[-1] for t in e.tokens], dtype=torch.int64)


def _verify(e: Engine, candidates: torch.Tensor, mask: torch.Tensor):
    """Target verify of [bs, N] candidates under a [bs, N, N] mask."""
    bs, n = candidates.shape
    segs = e.segments([n] * bs, list(mask))
    return e.forward(candidates.reshape(-1), segs)


def _plain(e: Engine) -> None:
    """Non-speculative decoding: one token per request per round, through the target site."""
    root = _root(e)
    logits, _, _ = _verify(e, root[:, None], torch.ones(e.bs, 1, 1, dtype=torch.bool))
    name = _target_decision(e)
    values = {name: e.sample_or_argmax(logits, e.cache_len)} if e.last else None
    nxt = e.decide(f"{e.method}_target", values)[name]
    e.commit_rows([torch.tensor([b]) for b in range(e.bs)], [[int(t)] for t in nxt])


def _draft_eagle(e: Engine) -> dict | None:
    t0 = time.perf_counter()
    if e.lookup:
        n = e.width
        drafts = torch.tensor([ngram_lookup(t, n - 1) for t in e.tokens],
                              dtype=torch.int64).view(e.bs, n - 1)
        if not _flat_ngram(e):  # vLLM: the chain of drafts, [bs, num_draft_tokens - 1]
            return {"draft_tokens": drafts}
        mask = causal(n).expand(e.bs, n, n)
        values = {"draft_tokens": torch.cat([_root(e)[:, None], drafts], 1).reshape(-1),
                  "tree_mask": mask.reshape(-1).contiguous()}
    elif not e.last:
        return None
    elif e.topk == 1:
        # A chain verifies its first num_draft_tokens - 1 drafts (the plan's draft width),
        # so it drafts no more than that: the draft_tokens site is [bs, num_draft_tokens - 1].
        values = {"draft_tokens": eagle_chain(e.head, e.state["proposal"][0],
                                              e.state["head_hidden"], min(e.steps, e.width - 1))}
    else:
        index, p = e.state["proposal"]
        d, parent, top = eagle_tree(e.head, index, p, e.state["head_hidden"], e.steps, e.width)
        values = {"draft_tokens": d, "parent_list": parent, "top_scores_index": top}
    e.timers["draft"] += time.perf_counter() - t0
    return values


def _flat_ngram(e: Engine) -> bool:
    """Whether the plan's n-gram draft is SGLang's flat tree (root, drafts and a tree mask per
    request) rather than vLLM's chain of drafts: read from the site's decisions."""
    return any(d.name == "tree_mask" for d in e.view.sites["ngram_draft"].decisions)


def _eagle_round(e: Engine) -> None:
    d = e.decide(f"{e.method}_draft", _draft_eagle(e))
    n, bs = e.width, e.bs
    if e.lookup and _flat_ngram(e):
        drafts = d["draft_tokens"].view(bs, n)[:, 1:]
    elif e.lookup:
        drafts = d["draft_tokens"].view(bs, n - 1)
    else:
        drafts = d["draft_tokens"]
    if e.topk > 1 and not e.lookup:
        parent, selected = d["parent_list"], d["top_scores_index"]
    else:
        parent, selected = chain_tree(bs, n - 1)
    verified = torch.tensor(e.cache_len, dtype=torch.int64)
    _, ridx, rnext, rsib, mask = build_tree(parent, selected, verified,
                                            1 if e.lookup else max(1, e.topk))
    candidates = torch.cat([_root(e)[:, None], drafts], 1)
    logits, hidden, taps = _verify(e, candidates, mask)
    values = _accept_eagle(e, candidates, (ridx, rnext, rsib), logits) if e.last else None
    a = e.decide(f"{e.method}_accept", values)
    index = a["accept_index"].to(torch.int64)
    predict = a["predict"].to(torch.int64)
    lens = (a["num_correct_drafts"] + 1).tolist()
    rows = [index[b, :k] for b, k in enumerate(lens)]
    e.commit_rows(rows, [predict[r].tolist() for r in rows])
    if e.last and not e.lookup:
        lastrow = _last_rows(rows)
        e.state["ctx"] = e.drafter_ctx(hidden, taps)[lastrow]
        _extend(e, predict[lastrow])


def _accept_eagle(e: Engine, candidates, tree: Tree, logits) -> dict:
    t0 = time.perf_counter()
    bs, n = candidates.shape
    width = e.width if e.lookup else e.steps + 1
    if e.sampling:
        out = _tree_sample(e, candidates, tree, logits, width)
    elif e.topk == 1 or e.lookup:
        out = _chain_greedy(candidates, logits.argmax(-1).view(bs, n))
    else:
        out = verify_tree_greedy(candidates, *tree, logits.argmax(-1).view(bs, n), width)
    e.timers["accept"] += time.perf_counter() - t0
    predict, index, correct = out
    # accept_index is [bs, num_steps + 1] (n-gram: [bs, num_draft_tokens]), -1 past the path
    if index.shape[1] < width:
        index = torch.cat([index, index.new_full((bs, width - index.shape[1]), -1)], 1)
    return {"predict": predict, "accept_index": index, "num_correct_drafts": correct}


def _chain_greedy(candidates, target):
    """greedy_accept on a chain, in eagle_sample's (predict, accept_index, count) form."""
    bs, n = candidates.shape
    _, correct, _ = greedy_accept(candidates[:, 1:], target)
    cols = torch.arange(n)
    on_path = cols[None, :] <= correct[:, None]
    flat = torch.arange(bs)[:, None] * n + cols[None, :]
    predict = torch.where(on_path, target, 0).reshape(-1).to(torch.int32)
    index = torch.where(on_path, flat, -1).to(torch.int32)
    return predict, index, correct.to(torch.int32)


def _last_rows(rows: list[torch.Tensor]) -> torch.Tensor:
    """Each request's last accepted row (none on an idle DP replica)."""
    return torch.tensor([int(r[-1]) for r in rows], dtype=torch.int64)


def _coins(e: Engine, n: int):
    salt = e.coin_salt(e.rng_accept_site())
    u = torch.stack([coins(e.sim.seed, q, pos, n + 1, salt) for q, pos in zip(e.requests, e.cache_len)]
                    ) if e.requests else torch.empty(0, n + 1, dtype=torch.float64)
    return u[:, :n].to(torch.float32).contiguous(), u[:, n].to(torch.float32).contiguous()


def _tree_sample(e: Engine, candidates, tree: Tree, logits, width):
    bs, n = candidates.shape
    probs = torch.softmax(logits / e.sim.temperature, -1).view(bs, n, logits.shape[-1])  # bs may be 0
    probs = probs.to(torch.float32)
    u, final = _coins(e, n)
    return tree_sample_target_only(candidates, *tree, u, final, probs, torch.zeros_like(probs), width)


def _draft_block(e: Engine) -> dict | None:
    if not e.last:
        return None
    t0 = time.perf_counter()
    root = _root(e)
    drafts = chain(e.head, root, e.state["ctx"], e.width - 1)
    e.timers["draft"] += time.perf_counter() - t0
    if e.m.draft_root:
        return {"draft_tokens": torch.cat([root[:, None], drafts], 1)}
    return {"draft_tokens": drafts}


def _block_round(e: Engine) -> None:
    """DFlash / DSpark: a chain block, a (static) verify plan, a chain accept, finalize_accept."""
    bs, n = e.bs, e.width
    d = e.decide(f"{e.method}_draft", _draft_block(e))["draft_tokens"]
    drafts = d[:, 1:] if e.m.draft_root else d
    verify_lens = torch.full((bs,), n, dtype=torch.int32)
    if e.m.plans_verify:
        plan = faults.verify_plan(e, {"verify_budget": torch.tensor(bs * n, dtype=torch.int32),
                                      "verify_lens": verify_lens})
        sites = [s.name for s in e.m.sites if s.phase == "plan_verify"]
        verify_lens = e.decide(sites, plan if e.last else None)["verify_lens"]
    candidates = torch.cat([_root(e)[:, None], drafts], 1)
    mask = torch.ones(n, n, dtype=torch.bool).tril().expand(bs, n, n)
    logits, hidden, taps = _verify(e, candidates, mask)
    correct, bonus = _block_accept(e, candidates, logits, verify_lens)
    prefix = torch.tensor(e.cache_len, dtype=torch.int32)
    commit, _, _, out = finalize_accept(correct, bonus, prefix, drafts, verify_lens)
    rows = [b * n + torch.arange(int(k)) for b, k in enumerate(commit)]
    e.commit_rows(rows, [out[b, :int(k)].tolist() for b, k in enumerate(commit)])
    if e.last:
        e.state["ctx"] = e.drafter_ctx(hidden, taps)[_last_rows(rows)]


def _block_accept(e: Engine, candidates, logits, verify_lens):
    """(correct_len, bonus) every rank holds, through the method's accept sites."""
    bs, n = candidates.shape
    site = e.m.accept_site(e.sampling)
    if site.accept == "target_predict":  # every rank accepts the target's predictions itself
        (name,) = site.decisions
        predicted = faults.verify_predictions(e, logits.argmax(-1).view(bs, n)) if e.last else None
        target = e.decide(site.name, {name: predicted} if e.last else None)
        _, correct, bonus = greedy_accept(candidates[:, 1:], target[name])
        return correct, bonus
    values = None
    if e.last:  # count_bonus: (accepted drafts, bonus[, cap trim]) in the site's order
        correct, bonus = _block_local(e, candidates, logits)
        cap_trim = correct - torch.minimum(correct, verify_lens - 1)
        values = dict(zip(site.decisions, (correct, bonus, cap_trim)))
    out = e.decide(site.name, values)
    return out[site.decisions[0]], out[site.decisions[1]]


def _block_local(e: Engine, candidates, logits):
    bs, n = candidates.shape
    if not e.sampling:
        _, correct, bonus = greedy_accept(candidates[:, 1:], logits.argmax(-1).view(bs, n))
        return correct, bonus
    parent, selected = chain_tree(bs, n - 1)
    _, ridx, rnext, rsib, _ = build_tree(parent, selected, torch.tensor(e.cache_len), 1)
    predict, index, count = _tree_sample(e, candidates, (ridx, rnext, rsib), logits, n)
    last = index.to(torch.int64).gather(1, count.to(torch.int64)[:, None]).squeeze(1)
    return count.to(torch.int32), predict.to(torch.int64)[last]

