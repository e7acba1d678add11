"""The sim's tiny decoder-only transformer, in float64, deterministic from a seed.

One set of full weights (weights.py `init_weights`) serves every rank: a rank slices its shard from
them (`Shard`), so the single-process model (the reference) and the sharded model compute
the same function; float64 keeps reduction-order differences far below any argmax gap.

Layers are pre-norm: x += attn(norm(x)); x += mlp_or_moe(norm(x)). No position embedding
(NoPE): a token's state depends on the tokens it attends to, so a tree node at depth d
computes what the same token at position seq_len + d computes in plain decoding. The
residual stream is dominated by the token embedding (`layer_scale` keeps each layer's write
small), so next-token choice is mostly a function of the current token: a drafter that
reads the embedding and the taps guesses it often, and acceptance is well above zero.

MoE (`moe`): the router (replicated) picks each row's top_k experts (ties: lower id first);
each (row, expert) pair travels to the moe_ep rank owning the expert (e % ep), is computed
there (the expert's FFN split over moe_tp, summed over moe_tp), travels back, and each row
sums its experts' outputs times the router weights in ascending expert id. The single
process runs the same code with an identity `Dispatch`, so the math (experts, weights,
combine order) is the same on every layout.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

F64 = torch.float64


@dataclass(frozen=True)
class ModelConfig:
    num_layers: int
    hidden: int
    vocab: int
    heads: int
    head_dim: int
    ffn: int
    num_experts: int = 0  # 0: dense MLP in every layer
    top_k: int = 0
    taps: tuple[int, ...] = ()
    seed: int = 0
    layer_scale: float = 0.35

    @property
    def drafter_in(self) -> int:
        """Width of the drafter's context: the taps side by side, or the last hidden."""
        return self.hidden * max(1, len(self.taps))


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * weight


def _slice(n: int, parts: int, index: int) -> slice:
    assert n % parts == 0, f"{n} does not split into {parts} parts"
    step = n // parts
    return slice(index * step, (index + 1) * step)


class Dispatch:
    """How MoE rows reach the moe_ep rank owning their expert and come back.

    The single process's: every row is this rank's, every expert is local, so each step
    is the identity. The sim's Comm supplies all_to_all over moe_ep (`comm.EpDispatch`).
    """

    def share(self, x: torch.Tensor):
        """The rows this rank routes, and what `unshare` needs to rebuild every row."""
        return x, None

    def counts(self, counts: torch.Tensor) -> torch.Tensor:
        """[ep, slots] rows this rank sends to each owner's local experts -> [ep, slots]
        rows each source sends to this rank's local experts."""
        return counts

    def exchange(self, rows: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
        """Rows to each peer (send[i] rows to peer i, in order) -> rows from each peer."""
        return rows

    def unshare(self, y: torch.Tensor, ctx) -> torch.Tensor:
        return y


@dataclass
class Shard:
    """What one rank holds of the full weights, and the collectives that stitch shards.

    attn: (parts, index) over attention heads (column q/k/v, row o); mlp: (parts, index)
    over the dense MLP's columns; experts: (ep, ep_index, tp, tp_index). The reduce
    callables and `dispatch` are identities in the reference; the sim's Comm supplies real
    collectives. `expert_rows` counts the (row, expert) pairs this rank's experts computed.
    """

    attn: tuple[int, int] = (1, 0)
    mlp: tuple[int, int] = (1, 0)
    experts: tuple[int, int, int, int] = (1, 0, 1, 0)
    attn_reduce: Callable[[torch.Tensor], torch.Tensor] = staticmethod(lambda x: x)
    mlp_enter: Callable[[torch.Tensor], tuple[torch.Tensor, Any]] = staticmethod(lambda x: (x, None))
    mlp_reduce: Callable[[torch.Tensor], torch.Tensor] = staticmethod(lambda x: x)
    moe_reduce: Callable[[torch.Tensor], torch.Tensor] = staticmethod(lambda x: x)  # over moe_tp
    mlp_leave: Callable[[torch.Tensor, Any], torch.Tensor] = staticmethod(lambda y, ctx: y)
    dispatch: Dispatch = field(default_factory=Dispatch)
    expert_rows: int = 0
    cache: dict = field(default_factory=dict)

    def local(self, w: dict, cfg: ModelConfig, layer: int) -> dict[str, torch.Tensor]:
        """This rank's slices of one layer (sliced once, then reused)."""
        if layer in self.cache:
            return self.cache[layer]
        p = f"layers.{layer}."
        hd = cfg.head_dim
        heads = _slice(cfg.heads, *self.attn)
        cols = slice(heads.start * hd, heads.stop * hd)
        out = {n: w[p + n][:, cols] for n in ("wq", "wk", "wv")}
        out["wo"] = w[p + "wo"][cols, :]
        if cfg.num_experts:
            ep, ep_i, tp, tp_i = self.experts
            mine = [e for e in range(cfg.num_experts) if e % ep == ep_i]
            fs = _slice(cfg.ffn, tp, tp_i)
            out["router"] = w[p + "router"]
            out["experts"] = mine
            out["e_up"] = w[p + "e_up"][mine][:, :, fs]
            out["e_down"] = w[p + "e_down"][mine][:, fs, :]
        else:
            fs = _slice(cfg.ffn, *self.mlp)
            out["up"], out["down"] = w[p + "up"][:, fs], w[p + "down"][fs, :]
        self.cache[layer] = out
        return out

    def local_heads(self, cfg: ModelConfig) -> int:
        return cfg.heads // self.attn[0]


@dataclass
class Segment:
    """One request's rows of a forward: `rows` in the flat batch, `prefix` cached positions
    (slots `base .. base + prefix - 1`), `mask` [n, n] which new rows each new row sees."""

    rows: slice
    base: int
    prefix: int
    mask: torch.Tensor


class KVCache:
    """Per local layer, K and V for `slots` positions: [slots, local heads, head_dim]."""

    def __init__(self, layers: range, slots: int, heads: int, head_dim: int):
        self.k = {i: torch.zeros(slots, heads, head_dim, dtype=F64) for i in layers}
        self.v = {i: torch.zeros(slots, heads, head_dim, dtype=F64) for i in layers}

    def write(self, new_kv: dict, rows: torch.Tensor, slots: torch.Tensor) -> None:
        """Keep the K/V of `rows` of a forward at `slots` (the accepted rows of a verify)."""
        for i, (k, v) in new_kv.items():
            self.k[i][slots] = k[rows]
            self.v[i][slots] = v[rows]


def attention(x, lw, cfg: ModelConfig, shard: Shard, cache: KVCache, layer: int, segs):
    """Attention of every segment over its cached prefix and the new rows its mask allows."""
    n_heads, hd = shard.local_heads(cfg), cfg.head_dim
    q = (x @ lw["wq"]).view(-1, n_heads, hd)
    k = (x @ lw["wk"]).view(-1, n_heads, hd)
    v = (x @ lw["wv"]).view(-1, n_heads, hd)
    out = torch.empty_like(q)
    for s in segs:
        past = slice(s.base, s.base + s.prefix)
        keys = torch.cat([cache.k[layer][past], k[s.rows]])
        vals = torch.cat([cache.v[layer][past], v[s.rows]])
        scores = torch.einsum("qhd,khd->hqk", q[s.rows], keys) / math.sqrt(hd)
        allowed = torch.cat([torch.ones(s.mask.shape[0], s.prefix, dtype=torch.bool), s.mask], 1)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out[s.rows] = torch.einsum("hqk,khd->qhd", torch.softmax(scores, -1), vals)
    y = out.reshape(x.shape[0], n_heads * hd) @ lw["wo"]  # a replica may serve no rows
    return shard.attn_reduce(y), (k, v)


def mlp(x, lw, cfg: ModelConfig, shard: Shard):
    """Dense MLP or MoE over the rows the TP block shares (gathered under DP-attention)."""
    xs, ctx = shard.mlp_enter(x)
    if not cfg.num_experts:
        y = shard.mlp_reduce(torch.relu(xs @ lw["up"]) @ lw["down"])
        return shard.mlp_leave(y, ctx)
    return shard.mlp_leave(moe(xs, lw, cfg, shard), ctx)


def route(x: torch.Tensor, router: torch.Tensor, top_k: int):
    """Each row's top_k experts in ascending id, and their router weights (softmax gates).

    Ties go to the lower expert id (a stable sort), so every rank picks the same experts.
    """
    gates = torch.softmax(x @ router, -1)
    picked = torch.sort(gates, dim=-1, descending=True, stable=True).indices[:, :top_k]
    experts = picked.sort(-1).values
    return experts, gates.gather(-1, experts)


def moe(xs, lw, cfg: ModelConfig, shard: Shard) -> torch.Tensor:
    """Route, dispatch, compute the local experts, return, combine (see the module doc).

    Pairs (row r, its j-th expert e) are sent ordered by owner rank (e % ep), then local
    expert (e // ep), then row; the counts go first so the receiver knows which rows are
    whose and for which of its experts.
    """
    d, k, h = shard.dispatch, cfg.top_k, xs.shape[1]
    ep = shard.experts[0]
    slots = -(-cfg.num_experts // ep)
    mine, share = d.share(xs)
    experts, weights = route(mine, lw["router"], k)
    flat = experts.reshape(-1)
    owner, slot = flat % ep, flat // ep
    order = torch.argsort(owner * slots + slot, stable=True)
    counts = torch.zeros(ep * slots, dtype=torch.int64)
    counts.index_add_(0, owner * slots + slot, torch.ones_like(flat))
    counts = counts.view(ep, slots)
    got_counts = d.counts(counts)
    send, recv = counts.sum(1).tolist(), got_counts.sum(1).tolist()
    got = d.exchange(mine.repeat_interleave(k, 0)[order], send, recv)
    got_slot = torch.arange(slots).repeat(ep).repeat_interleave(got_counts.reshape(-1))
    out = torch.zeros_like(got)
    for j in range(len(lw["experts"])):
        rows = (got_slot == j).nonzero().squeeze(1)
        if rows.numel():
            out[rows] = torch.relu(got[rows] @ lw["e_up"][j]) @ lw["e_down"][j]
        shard.expert_rows += rows.numel()
    if out.numel():  # every moe_tp peer received the same rows in the same order
        out = shard.moe_reduce(out)
    back = d.exchange(out, recv, send)
    pairs = torch.empty_like(back)
    pairs[order] = back
    pairs = pairs.view(-1, k, h)
    y = weights[:, :1] * pairs[:, 0]
    for j in range(1, k):  # ascending expert id: one fixed float64 order on every layout
        y = y + weights[:, j:j + 1] * pairs[:, j]
    return d.unshare(y, share)


def run_layers(w, cfg: ModelConfig, shard: Shard, cache: KVCache, layers: range, x, segs,
               taps: tuple[int, ...] = ()):
    """Run `layers` over x [T, hidden]; returns x, the new K/V per layer and owned taps.

    Tap L is the residual stream entering layer L; the stage ending at L emits it.
    """
    new_kv, tapped = {}, {}
    for i in layers:
        if i in taps:
            tapped[i] = x
        lw = shard.local(w, cfg, i)
        a, new_kv[i] = attention(rms_norm(x, w["norm"]), lw, cfg, shard, cache, i, segs)
        x = x + a
        x = x + mlp(rms_norm(x, w["norm"]), lw, cfg, shard)
    if layers.stop in taps:
        tapped[layers.stop] = x
    return x, new_kv, tapped


def logits_of(w, x: torch.Tensor) -> torch.Tensor:
    return rms_norm(x, w["norm"]) @ w["lm_head"]


def causal(n: int) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool).tril()
