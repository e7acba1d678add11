"""The sim's math on one process: shards sum to the full model, verify equals decoding."""

from __future__ import annotations

import torch

from specplan.sim.drafter import Head, chain_tree, eagle_tree, ngram_lookup, topk_proposal
from specplan.sim.model import (KVCache, ModelConfig, Segment, Shard, attention, causal, logits_of,
                                mlp, rms_norm, route, run_layers)
from specplan.sim.reference import greedy
from specplan.sim.weights import init_weights
from specplan.runtime.kernels import build_tree

CFG = ModelConfig(num_layers=3, hidden=64, vocab=97, heads=4, head_dim=16, ffn=128, seed=3)
MOE = ModelConfig(num_layers=2, hidden=64, vocab=97, heads=4, head_dim=16, ffn=128,
                  num_experts=4, top_k=2, seed=5)


def _x(n=5, seed=0):
    return torch.randn(n, 64, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_column_and_row_parallel_attention_sums_to_the_full_layer():
    w, x = init_weights(CFG), _x()
    seg = [Segment(slice(0, 5), 0, 0, causal(5))]
    full, _ = attention(x, Shard().local(w, CFG, 0), CFG, Shard(), KVCache(range(3), 8, 4, 16), 0, seg)
    parts = []
    for i in range(2):
        s = Shard(attn=(2, i))
        y, _ = attention(x, s.local(w, CFG, 0), CFG, s, KVCache(range(3), 8, 2, 16), 0, seg)
        parts.append(y)
    assert torch.allclose(parts[0] + parts[1], full, atol=1e-12)
    assert not torch.allclose(parts[0], full)


def test_dense_mlp_shards_sum_to_the_full_mlp():
    w, x = init_weights(CFG), _x()
    full = mlp(x, Shard().local(w, CFG, 1), CFG, Shard())
    parts = [mlp(x, Shard(mlp=(4, i)).local(w, CFG, 1), CFG, Shard(mlp=(4, i))) for i in range(4)]
    assert torch.allclose(sum(parts), full, atol=1e-12)


def test_moe_expert_ffn_split_over_moe_tp_sums_to_the_full_layer():
    w, x = init_weights(MOE), _x(7)
    full = mlp(x, Shard().local(w, MOE, 0), MOE, Shard())
    parts = []
    for tp in range(2):
        s = Shard(experts=(1, 0, 2, tp))
        assert s.local(w, MOE, 0)["experts"] == [0, 1, 2, 3]
        parts.append(mlp(x, s.local(w, MOE, 0), MOE, s))
    assert torch.allclose(sum(parts), full, atol=1e-12)


def test_the_moe_combines_top_k_experts_with_router_weights_in_expert_order():
    w, x = init_weights(MOE), _x(6)
    lw = Shard().local(w, MOE, 0)
    experts, weights = route(x, lw["router"], MOE.top_k)
    gates = torch.softmax(x @ lw["router"], -1)
    assert torch.equal(experts, experts.sort(-1).values)
    assert torch.equal(weights.sum(-1), gates.topk(2, -1).values.sum(-1))
    want = torch.zeros_like(x)
    for r in range(x.shape[0]):
        for j in range(MOE.top_k):
            e = int(experts[r, j])
            want[r] += weights[r, j] * (torch.relu(x[r] @ w["layers.0.e_up"][e]) @ w["layers.0.e_down"][e])
    assert torch.allclose(mlp(x, lw, MOE, Shard()), want, atol=1e-12)
    # ties go to the lower expert id
    tied, _ = route(x, torch.zeros(64, 4, dtype=torch.float64), 2)
    assert tied.tolist() == [[0, 1]] * x.shape[0]


def _moe_rank(rank: int, world: int, ep: int, port: int, out: str) -> None:
    """One rank of a gloo MoE layer: moe_tp fastest (rank = ep_index * moe_tp + tp_index)."""
    import types

    import torch.distributed as dist

    from specplan.sim.comm import Comm, make_shard

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    mtp = world // ep
    groups, ranks = {}, {"tp": list(range(world))}
    for i in range(ep):  # moe_tp groups, in the same order on every rank
        members = [i * mtp + t for t in range(mtp)]
        g = dist.new_group(members)
        if rank in members:
            groups["moe_tp"], ranks["moe_tp"] = g, members
    for t in range(mtp):
        members = [i * mtp + t for i in range(ep)]
        g = dist.new_group(members)
        if rank in members:
            groups["moe_ep"], ranks["moe_ep"] = g, members
    groups["tp"] = dist.group.WORLD
    rt = types.SimpleNamespace(rank=rank, groups=groups, ranks=ranks,
                               plan=types.SimpleNamespace(timeout_s=30.0))
    comm = Comm(rt)
    shard = make_shard(rt, comm, dp_attention=False)
    w = init_weights(MOE)
    result = {}
    for n in (7, 1):
        before = shard.expert_rows
        y = mlp(_x(n, seed=n), shard.local(w, MOE, 0), MOE, shard)
        result[n] = (y, shard.expert_rows - before)
    result["calls"] = comm.calls[0]
    torch.save(result, out)
    dist.destroy_process_group()


def _run_moe_ranks(tmp_path, world: int, ep: int) -> list[dict]:
    import multiprocessing
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_moe_rank, args=(r, world, ep, port, str(tmp_path / f"{r}.pt")))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * world
    return [torch.load(tmp_path / f"{r}.pt") for r in range(world)]


def _pairs_per_owner(n: int, ep: int) -> list[int]:
    w = init_weights(MOE)
    experts, _ = route(_x(n, seed=n), w["layers.0.router"], MOE.top_k)
    return [int((experts % ep == i).sum()) for i in range(ep)]


def _match_the_full_layer(results: list, ep_rank) -> None:
    """Every rank's output is the full layer's, and it computed exactly the (row, expert) pairs
    routed to the experts of its EP rank `ep_rank(rank)` (ep 2), for 7 rows and for 1."""
    w = init_weights(MOE)
    for n in (7, 1):
        full = mlp(_x(n, seed=n), Shard().local(w, MOE, 0), MOE, Shard())
        pairs = _pairs_per_owner(n, 2)
        for rank, res in enumerate(results):
            y, computed = res[n]
            assert torch.allclose(y, full, atol=1e-12)
            assert computed == pairs[ep_rank(rank)]


def test_moe_dispatch_moves_each_row_to_its_experts_owner_only(tmp_path):
    """2 ranks, ep 2: each computes only the (row, expert) pairs routed to its experts."""
    results = _run_moe_ranks(tmp_path, world=2, ep=2)
    _match_the_full_layer(results, lambda rank: rank)
    # every pair is computed once, on its owner; each rank shares out only ceil(n/2) rows
    for n in (7, 1):
        assert sum(_pairs_per_owner(n, 2)) == n * MOE.top_k
    pairs = _pairs_per_owner(7, 2)
    assert 0 < min(pairs) and max(pairs) < 7 * 2  # not every row on every local expert
    # per mlp call: counts all_to_all, rows out, rows back, all_gather of the shares
    assert all(res["calls"] == 2 * 4 for res in results)


def test_moe_dispatch_over_ep_2_with_moe_tp_2_matches_the_full_layer(tmp_path):
    results = _run_moe_ranks(tmp_path, world=4, ep=2)
    _match_the_full_layer(results, lambda rank: rank // 2)


def test_a_verify_forward_over_a_cached_prefix_equals_decoding_one_token_at_a_time():
    w = init_weights(CFG)
    tokens = torch.tensor([5, 9, 1, 44, 7, 3, 60])
    layers = range(CFG.num_layers)
    one = KVCache(layers, 16, 4, 16)
    step_logits = []
    for i, t in enumerate(tokens.tolist()):
        x, kv, _ = run_layers(w, CFG, Shard(), one, layers, w["embed"][[t]],
                              [Segment(slice(0, 1), 0, i, causal(1))])
        one.write(kv, torch.tensor([0]), torch.tensor([i]))
        step_logits.append(logits_of(w, x))
    many = KVCache(layers, 16, 4, 16)
    x, kv, _ = run_layers(w, CFG, Shard(), many, layers, w["embed"][tokens[:4]],
                          [Segment(slice(0, 4), 0, 0, causal(4))])
    many.write(kv, torch.arange(4), torch.arange(4))
    x, _, _ = run_layers(w, CFG, Shard(), many, layers, w["embed"][tokens[4:]],
                         [Segment(slice(0, 3), 0, 4, causal(3))])
    assert torch.allclose(logits_of(w, x), torch.cat(step_logits[4:]), atol=1e-10)


def test_taps_are_the_residual_stream_entering_a_layer():
    w = init_weights(CFG)
    seg = [Segment(slice(0, 2), 0, 0, causal(2))]
    x0 = w["embed"][torch.tensor([1, 2])]
    _, _, taps = run_layers(w, CFG, Shard(), KVCache(range(3), 4, 4, 16), range(0, 3), x0, seg, (0, 2, 3))
    mid, _, _ = run_layers(w, CFG, Shard(), KVCache(range(3), 4, 4, 16), range(0, 2), x0, seg)
    assert sorted(taps) == [0, 2, 3]
    assert torch.equal(taps[0], x0) and torch.allclose(taps[2], mid)


def test_reference_greedy_is_deterministic_and_depends_on_the_seed():
    a = greedy(CFG, [1, 2, 3], 6)
    assert a == greedy(CFG, [1, 2, 3], 6) and len(a) == 6
    other = ModelConfig(**{**CFG.__dict__, "seed": 4})
    assert greedy(other, [1, 2, 3], 6) != a


def test_the_eagle_tree_is_a_valid_build_tree_input():
    w = init_weights(CFG)
    head = Head(w)
    bs, steps, k, n = 3, 3, 2, 6
    index, p, hidden = topk_proposal(head, torch.tensor([4, 5, 6]), torch.zeros(bs, 64, dtype=torch.float64), k)
    drafts, parent, top = eagle_tree(head, index, p, hidden, steps, n)
    assert drafts.shape == (bs, n - 1) and parent.shape == (bs, (steps - 1) * k + 1)
    assert torch.equal(top, top.sort(-1).values)
    _, _, nxt, _, mask = build_tree(parent, top, torch.tensor([7, 7, 7]), k)
    assert mask.shape == (bs, n, n) and bool(mask[:, :, 0].all())
    # every node hangs under the root: no orphan has a mask row of only {root, itself}
    depth = mask.sum(-1) - 1
    assert int(depth.max()) <= steps


def test_chain_tree_builds_a_causal_mask():
    parent, selected = chain_tree(2, 3)
    _, _, _, _, mask = build_tree(parent, selected, torch.tensor([4, 9]), 1)
    assert torch.equal(mask[0], causal(4)) and torch.equal(mask[1], causal(4))


def test_ngram_lookup_follows_the_latest_match_of_the_longest_suffix():
    assert ngram_lookup([1, 2, 3, 9, 1, 2, 3], 3) == [9, 1, 2]
    assert ngram_lookup([5, 6, 7], 2) == [7, 7]
    assert ngram_lookup([4, 8, 4], 3) == [8, 4, 4]


def test_the_drafter_guesses_the_target_often():
    """The design that keeps acceptance above zero: embedding-dominated residual stream."""
    w = init_weights(CFG)
    tokens = torch.arange(40)
    target = logits_of(w, rms_norm(w["embed"][tokens], w["norm"])).argmax(-1)
    drafted = Head(w).step(tokens, torch.zeros(40, 64, dtype=torch.float64), first=True)[0].argmax(-1)
    assert (target == drafted).float().mean() > 0.5
