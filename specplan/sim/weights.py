"""The sim model's weights (model.py): every weight of the target and the drafter, generated
in one fixed order from the config's seed; a tap drafter's draft.fc is then fitted to the
target (fit.py), which runs the model's layers, so the weights sit above both.
"""

from __future__ import annotations

import math

import torch

from specplan.sim.fit import fit_drafter
from specplan.sim.model import F64, ModelConfig


def _normal(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=F64) * scale


def init_weights(cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Every weight of the target and the drafter, generated in one fixed order."""
    g = torch.Generator().manual_seed(cfg.seed)
    h, a, f = cfg.hidden, cfg.heads * cfg.head_dim, cfg.ffn
    out_scale = cfg.layer_scale / math.sqrt(cfg.num_layers)
    w = {"embed": _normal(g, cfg.vocab, h), "norm": torch.ones(h, dtype=F64),
         "lm_head": _normal(g, h, cfg.vocab, scale=1 / math.sqrt(h))}
    for i in range(cfg.num_layers):
        p = f"layers.{i}."
        for name in ("wq", "wk", "wv"):
            w[p + name] = _normal(g, h, a, scale=1 / math.sqrt(h))
        w[p + "wo"] = _normal(g, a, h, scale=out_scale / math.sqrt(a))
        if cfg.num_experts:
            w[p + "router"] = _normal(g, h, cfg.num_experts, scale=1 / math.sqrt(h))
            w[p + "e_up"] = _normal(g, cfg.num_experts, h, f, scale=1 / math.sqrt(h))
            w[p + "e_down"] = _normal(g, cfg.num_experts, f, h, scale=out_scale / math.sqrt(f))
        else:
            w[p + "up"] = _normal(g, h, f, scale=1 / math.sqrt(h))
            w[p + "down"] = _normal(g, f, h, scale=out_scale / math.sqrt(f))
    # The drafter: [embed(token) | ctx] -> h, one MLP block, the shared norm and lm_head.
    # Mostly the token's embedding (identity block), a little of the context.
    w["draft.fc"] = _normal(g, cfg.drafter_in, h, scale=0.1 / math.sqrt(cfg.drafter_in))
    w["draft.step"] = _normal(g, h, h, scale=0.1 / math.sqrt(h))
    w["draft.up"] = _normal(g, h, f, scale=1 / math.sqrt(h))
    w["draft.down"] = _normal(g, f, h, scale=out_scale / math.sqrt(f))
    # Standalone: a smaller model with its own embedding, one MLP block and its own head,
    # near the target's (a copy plus noise), so it agrees with it often.
    w["small.embed"] = w["embed"] + _normal(g, cfg.vocab, h, scale=0.05)
    w["small.up"] = _normal(g, h, f, scale=1 / math.sqrt(h))
    w["small.down"] = _normal(g, f, h, scale=out_scale / math.sqrt(f))
    w["small.lm_head"] = w["lm_head"] + _normal(g, h, cfg.vocab, scale=0.02 / math.sqrt(h))
    if cfg.taps:  # a tap drafter reads its taps, as a trained one does (sim/fit.py)
        w["draft.fc"] = fit_drafter(w, cfg)
    return w
