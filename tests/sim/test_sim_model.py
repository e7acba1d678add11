"""The sim's math on one process: shards sum to the full model, verify equals decoding."""

from __future__ import annotations

import torch

from specplan.sim.drafter import Head, chain_tree, eagle_tree, ngram_lookup, topk_proposal
from specplan.sim.model import (KVCache, ModelConfig, Segment, Shard, attention, causal,
                                init_weights, logits_of, mlp, rms_norm, run_layers)
from specplan.sim.reference import greedy
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


def test_moe_experts_over_ep_and_moe_tp_sum_to_the_full_layer():
    w, x = init_weights(MOE), _x(7)
    full = mlp(x, Shard().local(w, MOE, 0), MOE, Shard())
    parts = []
    for ep in range(2):
        for tp in range(2):
            s = Shard(experts=(2, ep, 2, tp))
            assert s.local(w, MOE, 0)["experts"] == [e for e in range(4) if e % 2 == ep]
            parts.append(mlp(x, s.local(w, MOE, 0), MOE, s))
    assert torch.allclose(sum(parts), full, atol=1e-12)


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
