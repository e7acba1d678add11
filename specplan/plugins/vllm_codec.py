"""Between vLLM 0.33.0's accept and draft tensors and the decisions a plan names.

vLLM 0.33.0 verifies a chain for every method it runs (tree verification was removed): one
accept is `sampled [R, W]` int64 and `num_sampled [R]` int32, W = K + 1, K =
num_speculative_tokens; an accepted position holds the draft token itself, the position after
the last accepted draft holds the bonus. The plan's method says its accept site's layout
(methods/base.py Site.accept), its decisions in this order:

"path" (the EAGLE family, n-gram): the triple, one row per request

    predict            [R * W] int32   sampled, -1 past num_sampled and to W, row-major
    accept_index       [R, W]  int32   r * W + j for j < num_sampled[r], else -1
    num_correct_drafts [R]     int32   num_sampled - 1 (-1: a chunked-prefill row, no sample)

"count_bonus" (DSpark, DFlash sampled: vLLM's V2 DSparkSpeculator / DFlashSpeculator
propose, the same RejectionSampler verifies): a count and a bonus, the accepted drafts being
the step's own inputs, which every rank of the replica holds alike (the draft site converged
them):

    correct_len_* / accept_len   [R] int32   num_sampled - 1 (-1: no sample)
    bonus_* / bonus              [R] int64   sampled[r, num_sampled - 1]
    cap_trim_lens_*              [R] int32   0 (vLLM caps nothing after the accept)

decoded as sampled[r, j] = the input token of logits row j + 1 (draft j) for j < count, the
bonus at j = count. "target_predict" (DFlash greedy) names the target's own predictions:

    target_predict               [R, W] int64   sampled, -1 past num_sampled (vLLM stops at
                                                 the first mismatch; every rank derives the
                                                 same accept from the same prefix)

All layouts share `next_token_ids [R]` (a step without drafts) and
`draft_tokens [R, K]` (DFlash's plan field is K + 1 wide: vLLM's drafts fill the first K).
"""

from __future__ import annotations

import torch

from specplan.engines import convention
from specplan.plan import Plan
from specplan.plan.model import Site

TARGET = ("next_token_ids",)
DRAFT = ("draft_tokens",)
# A count_bonus site's decisions by position: what each carries of vLLM's accept.
COUNT_BONUS = ("accepted", "bonus", "zero")


class PlanMismatch(ValueError):
    """The plan's sites cannot carry vLLM's tensors (the plugin refuses the start)."""


def accept_layout(plan: Plan, site: Site) -> str:
    """The layout of the plan's accept `site`, as its method says (Site.accept): "path",
    "count_bonus" or "target_predict"."""
    layout = convention(plan.engine).method(plan.speculative.method).site(site.name).accept
    assert layout is not None, f"{site.name} is not an accept site"
    return layout


def _roles(names: tuple[str, ...]) -> dict[str, str]:
    """A count_bonus site's decision names by role (accepted, bonus, then a cap trim)."""
    return dict(zip(COUNT_BONUS, names))


def plan_sites(plan: Plan) -> dict[str, Site | None]:
    """The plan's accept, first-token and draft sites, by the decisions vLLM's tensors map to.
    A round with a greedy and a sampled accept site (sampling: mixed) is served by the sampled
    one (vLLM's one rejection sampler takes both kinds of rows; the fused boundary carries the
    other's fields as zeros)."""
    found: dict[str, Site | None] = {"accept": None, "target": None, "draft": None}
    for site in plan.sites:
        names = tuple(d.name for d in site.decisions)
        if site.phase == "accept":
            if found["accept"] is None or _sampled(plan, site):
                found["accept"] = site
        elif site.phase in ("target", "draft") and names == (TARGET if site.phase == "target" else DRAFT):
            found[site.phase] = site
        elif site.phase == "draft":
            raise PlanMismatch(f"speculative.method {plan.speculative.method}: site {site.name} "
                               f"carries {list(names)}, which vLLM 0.33.0's chain drafts do not "
                               f"compute (it maps to {list(DRAFT)})")
    return found


def _sampled(plan: Plan, site: Site) -> bool:
    """Whether `site` is the accept of the sampling path (its first decision's path)."""
    m = convention(plan.engine).method(plan.speculative.method)
    return m.decision(site.decisions[0].name).path == "sampling"


def encode_accept(layout: str | None, names: tuple[str, ...], sampled: torch.Tensor,
                  num_sampled: torch.Tensor, width: int) -> dict:
    rows, dev = sampled.shape[0], sampled.device
    if layout == "count_bonus":
        last = (num_sampled.to(torch.int64) - 1).clamp(min=0)[:, None]
        bonus = torch.where(num_sampled > 0, sampled.gather(1, last)[:, 0], torch.full_like(last[:, 0], -1))
        by_role = {"accepted": (num_sampled - 1).to(torch.int32), "bonus": bonus,
                   "zero": torch.zeros(rows, dtype=torch.int32, device=dev)}
        return {n: by_role[role] for role, n in _roles(names).items()}
    padded = torch.full((rows, width), -1, dtype=torch.int32 if layout == "path" else torch.int64,
                        device=dev)
    padded[:, : sampled.shape[1]] = sampled
    cols = torch.arange(width, dtype=torch.int32, device=dev)
    live = cols[None, :] < num_sampled[:, None]  # past num_sampled vLLM leaves stale memory
    if layout == "target_predict":
        return {names[0]: torch.where(live, padded, torch.full_like(padded, -1))}
    flat = torch.arange(rows, dtype=torch.int32, device=dev)[:, None] * width + cols
    index = torch.where(live, flat, torch.full_like(flat, -1))
    predict = torch.where(live, padded, torch.full_like(padded, -1))
    return dict(zip(names, (predict.reshape(-1), index, (num_sampled - 1).to(torch.int32))))


def decode_accept(layout: str | None, names: tuple[str, ...], dec: dict, rows: int, width: int,
                  batch=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(sampled [rows, width] int64, num_sampled [rows] int32) from converged decisions.
    count_bonus reads the step's drafts from `batch` (input_ids at its logits rows)."""
    if layout == "path":
        predict, _, correct = names
        sampled = dec[predict][: rows * width].reshape(rows, width).to(torch.int64)
        return sampled, (dec[correct][:rows] + 1).to(torch.int32)
    if layout == "target_predict":
        sampled = dec[names[0]][:rows, :width].to(torch.int64)
        return sampled, (sampled >= 0).sum(dim=1).to(torch.int32)
    role = _roles(names)
    count = dec[role["accepted"]][:rows].to(torch.int64)
    bonus = dec[role["bonus"]][:rows].to(torch.int64)
    tokens = batch.input_ids[batch.logits_indices].to(torch.int64).to(count.device)
    starts = batch.cu_num_logits[:rows].to(torch.int64).to(count.device)
    cols = torch.arange(width, dtype=torch.int64, device=count.device)[None, :]
    at = (starts[:, None] + cols + 1).clamp(max=max(tokens.shape[0] - 1, 0))
    drafts = tokens[at] if tokens.shape[0] else torch.zeros_like(at)
    sampled = torch.where(cols < count[:, None], drafts,
                          torch.where(cols == count[:, None], bonus[:, None], torch.full_like(drafts, -1)))
    return sampled, (count + 1).to(torch.int32)


def pad_drafts(drafts: torch.Tensor, site: Site) -> torch.Tensor:
    """vLLM's [R, K] drafts in the plan's field width (DFlash's is K + 1), -1 beyond K."""
    width = site.decisions[0].shape[1]
    if drafts.shape[1] >= width:
        return drafts
    out = torch.full((drafts.shape[0], width), -1, dtype=drafts.dtype, device=drafts.device)
    out[:, : drafts.shape[1]] = drafts
    return out
