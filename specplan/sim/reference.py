"""The reference: the full sim model on one process, plain greedy decoding, no speculation."""

from __future__ import annotations

import torch

from specplan.sim.model import KVCache, ModelConfig, Segment, Shard, causal, init_weights, logits_of, run_layers


def greedy(cfg: ModelConfig, prompt: list[int], n_new: int, w: dict | None = None) -> list[int]:
    """The first `n_new` tokens greedy decoding appends to `prompt`."""
    w = w if w is not None else init_weights(cfg)
    shard = Shard()
    layers = range(cfg.num_layers)
    cache = KVCache(layers, len(prompt) + n_new + 1, cfg.heads, cfg.head_dim)
    tokens = torch.tensor(prompt, dtype=torch.int64)
    out: list[int] = []
    length = 0
    while len(out) < n_new:
        n = tokens.shape[0]
        seg = Segment(slice(0, n), 0, length, causal(n))
        x, kv, _ = run_layers(w, cfg, shard, cache, layers, w["embed"][tokens], [seg])
        cache.write(kv, torch.arange(n), length + torch.arange(n))
        length += n
        nxt = int(logits_of(w, x[-1:]).argmax(-1))
        out.append(nxt)
        tokens = torch.tensor([nxt], dtype=torch.int64)
    return out
