"""The reference: the full sim model on one process, plain greedy decoding, no speculation;
and the model's own argmax along a given token sequence (teacher forcing)."""

from __future__ import annotations

import torch

from specplan.sim.model import KVCache, ModelConfig, Segment, Shard, causal, logits_of, run_layers
from specplan.sim.weights import init_weights


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


def picks(cfg: ModelConfig, tokens: list[int], w: dict | None = None) -> tuple[list[int], list[float]]:
    """The argmax after each prefix of `tokens`, and its logit: one causal forward on one process."""
    w = w if w is not None else init_weights(cfg)
    layers, n = range(cfg.num_layers), len(tokens)
    cache = KVCache(layers, n, cfg.heads, cfg.head_dim)
    x = w["embed"][torch.tensor(tokens, dtype=torch.int64)]
    x, _, _ = run_layers(w, cfg, Shard(), cache, layers, x, [Segment(slice(0, n), 0, 0, causal(n))])
    peaks, argmax = logits_of(w, x).max(-1)
    return argmax.tolist(), peaks.tolist()
