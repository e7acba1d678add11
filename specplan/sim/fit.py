"""A tap drafter that reads its taps: draft.fc fitted to the target, as training would.

A random draft.fc leaves the taps a small, arbitrary share of the drafter's input, so taps in
the wrong slots (the seed's pp > 2 middle-stage case) would change nothing measurable. The
fit makes the drafter depend on them as a trained EAGLE3 / DFlash / DSpark head does: over
random token sequences run through the whole target on one process, draft.fc is the ridge
least-squares map from the taps at position t to what the target adds to the embedding of
token t + 1 by its last layer (the residual whose logits give token t + 2). Every rank fits
the same map from the same seed, so drafts stay a pure function of converged inputs.
"""

from __future__ import annotations

import zlib

import torch

from specplan.sim.model import F64, KVCache, Segment, Shard, causal, run_layers

SEQUENCES, LENGTH, RIDGE = 16, 48, 1.0


def fit_drafter(w: dict, cfg) -> torch.Tensor:
    """draft.fc [hidden * len(taps), hidden] for `cfg.taps`, from the target weights in `w`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: threads only contend (50x slower on a busy host)
    try:
        return _fit(w, cfg)
    finally:
        torch.set_num_threads(threads)


def _fit(w: dict, cfg) -> torch.Tensor:
    g = torch.Generator().manual_seed(zlib.crc32(f"fit/{cfg.seed}".encode()))
    layers, ctx, delta = range(cfg.num_layers), [], []
    for _ in range(SEQUENCES):
        tokens = torch.randint(0, cfg.vocab, (LENGTH,), generator=g)
        cache = KVCache(layers, LENGTH, cfg.heads, cfg.head_dim)
        seg = Segment(slice(0, LENGTH), 0, 0, causal(LENGTH))
        x, _, tapped = run_layers(w, cfg, Shard(), cache, layers, w["embed"][tokens], [seg], cfg.taps)
        ctx.append(torch.cat([tapped[t] for t in sorted(tapped)], 1)[:-1])
        delta.append(x[1:] - w["embed"][tokens[1:]])
    a, b = torch.cat(ctx), torch.cat(delta)
    return torch.linalg.solve(a.T @ a + RIDGE * torch.eye(a.shape[1], dtype=F64), a.T @ b)
