"""Faults on each kind of decision, made on every rank but each replica's source.

`noise` perturbs the target's logits (sim/engine.py `Engine.forward`); `draft-noise` the
drafter's logits (every draft forward: the draft extend's proposal, chain and tree drafts,
DFlash / DSpark blocks); `verify-noise` the verify plan of DSpark (its verify budget and
verify_lens) and DFlash (the target's per-position predictions it verifies against). A
decision the plan converges takes the source's value, so the fault vanishes; one left
unconverged differs on the perturbed ranks, and the probe (or the tokens) names it.

`tap-order` is the seed's silent pp > 2 case: a middle stage, which must both pass on the taps
it received and add its own, hands its own first. The payload keeps its width, so nothing
fails: the drafter reads its taps in the wrong slots, drafts valid tokens that are rejected
more often, and only the acceptance (`simulate --trace-dir`, `diff --acceptance`) shows it.
"""

from __future__ import annotations

import zlib

import torch

from specplan.sim.drafter import Head
from specplan.sim.model import F64


def _gen(kind: str, rank: int, round: int, call: int) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(f"{kind}/{rank}/{round}/{call}".encode()))


class NoisyHead(Head):
    """The drafter as a perturbed rank runs it: its logits carry per-rank noise."""

    def __init__(self, head: Head, engine, scale: float):
        super().__init__(head.w, head.standalone)
        self.engine, self.scale, self.calls = engine, scale, 0

    def step(self, tokens: torch.Tensor, ctx: torch.Tensor, first: bool):
        logits, h = super().step(tokens, ctx, first)
        self.calls += 1
        g = _gen("draft-noise", self.engine.rt.rank, self.engine.round, self.calls)
        return logits + self.scale * torch.randn(logits.shape, generator=g, dtype=F64), h


def perturbed(e) -> bool:
    """Whether this rank carries the run's fault: not its replica's source."""
    return e.rt.rank not in e.sources()


def install(e) -> None:
    """Give a perturbed rank its noisy drafter (draft-noise)."""
    if e.sim.inject == "draft-noise" and perturbed(e):
        e.head = NoisyHead(e.head, e, e.sim.noise)


def verify_plan(e, plan: dict) -> dict:
    """DSpark's verify plan as a perturbed rank makes it: a smaller budget and shorter
    verify_lens on some rows (never below 1: the root is always verified)."""
    if e.sim.inject != "verify-noise" or not perturbed(e):
        return plan
    lens = plan["verify_lens"].clone()
    g = _gen("verify-noise", e.rt.rank, e.round, 0)
    cut = torch.randint(0, int(lens.max()), lens.shape, generator=g).to(lens.dtype)
    lens = torch.clamp(lens - cut, min=1)
    return {"verify_budget": plan["verify_budget"] - 1, "verify_lens": lens}


def verify_predictions(e, target: torch.Tensor) -> torch.Tensor:
    """DFlash's target predictions as a perturbed rank verifies against them: a few
    positions point at another token."""
    if e.sim.inject != "verify-noise" or not perturbed(e):
        return target
    g = _gen("verify-noise", e.rt.rank, e.round, 1)
    flip = torch.rand(target.shape, generator=g) < 0.5
    return torch.where(flip, (target + 1) % e.cfg.vocab, target)


def stage_taps(e, upstream: torch.Tensor, own: list[torch.Tensor]) -> torch.Tensor:
    """The taps a stage hands on: the upstream ones, then its own (tap-order: own first on a
    middle stage)."""
    if e.sim.inject == "tap-order" and not e.first and not e.last:
        return torch.cat(own + [upstream], 1)
    return torch.cat([upstream] + own, 1)
