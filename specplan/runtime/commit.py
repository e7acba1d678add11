"""What an accept site commits, derived from converged decisions only (so every rank commits
the same): `Runtime.accept` and the generated programs' `finalize` step both call this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from specplan.engines import convention
from specplan.methods.base import Site
from specplan.runtime.kernels import finalize_accept

if TYPE_CHECKING:
    from specplan.plan import Plan


@dataclass
class Accepted:
    """What an accept boundary commits: the converged decisions and the layout derived from them."""

    decisions: dict[str, torch.Tensor]
    commit_lens: torch.Tensor  # [bs] int32: accepted drafts + the bonus
    new_seq_lens: torch.Tensor  # [bs] int32
    out_tokens: torch.Tensor  # [bs, num_steps + 1] int64, -1 past commit_lens (never a token id)
    cap_trim_lens: torch.Tensor | None = None


def fired(sites: dict, target: int | str | None, dec: dict) -> tuple[str, dict]:
    """The accept site that fired and its decisions: for a boundary of one accept site, that
    site and all of `dec`; for alternatives (a mixed batch) the named site's, which the caller
    must name."""
    site = sites.get(target) if isinstance(target, str) else None
    if site is None:
        accepts = sorted(s.name for s in sites.values() if s.phase == "accept"
                         and any(d.name in dec for d in s.decisions))
        if len(accepts) > 1:
            raise ValueError(f"boundary {target} carries the alternative accept sites "
                             f"{accepts}: name the site that fired this round")
        if not accepts:
            raise ValueError(f"boundary {target} carries no accept site's decisions "
                             f"(found {sorted(dec)})")
        return accepts[0], dec
    mine = {d.name for d in site.decisions}
    return site.name, {k: v for k, v in dec.items() if k in mine}


def accept_site(plan: Plan, name: str) -> Site:
    """The method's record of the plan's accept site `name` (its Site.accept layout), as the
    plan's engine runs the method (methods/)."""
    return convention(plan.engine).method(plan.speculative.method).site(name)


def derive_commit(site: Site, dec: dict, prefix: torch.Tensor, draft_tokens: torch.Tensor | None = None,
                  verify_lens: torch.Tensor | None = None) -> Accepted:
    """What an accept site commits, from converged decisions only, so every rank commits the same.

    The site's layout (Site.accept, its decisions in that order) says how:
    "path" (predict, accept_index, num_correct_drafts: the EAGLE family, n-gram): tokens
    gathered along the accepted path. "count_bonus" (accepted drafts, bonus[, cap trim]:
    DSpark, DFlash sampled): `finalize_accept` with the round's drafts. "target_predict"
    (DFlash greedy): `greedy_accept` of the drafts first.
    `Accepted.out_tokens` holds -1 past each row's commit_lens (never a valid token id).
    """
    names = site.decisions
    if site.accept == "path":
        predict, index, correct = (dec[n] for n in names)
        return _path_commit(dec, predict, index, correct, prefix)
    if site.accept not in ("count_bonus", "target_predict"):
        raise ValueError(f"{site.name} is not an accept site (Site.accept is {site.accept!r})")
    if draft_tokens is None:
        raise ValueError(f"{site.name}: finalizing a chain accept needs this round's draft_tokens")
    cap = dec.get(names[2]) if len(names) > 2 else None
    if site.accept == "target_predict":
        correct, bonus = _greedy_from_predict(dec[names[0]], draft_tokens)
        draft_tokens = draft_tokens[:, 1:]  # DFlash: column 0 is the root, not a draft
    else:
        correct, bonus = dec[names[0]], dec[names[1]]
    commit, seq, trim, out = finalize_accept(correct, bonus, prefix, draft_tokens, verify_lens)
    out = out.masked_fill(_past(commit, out.shape[1]), -1)
    return Accepted(dec, commit, seq, out, trim if cap is None else cap)


def _greedy_from_predict(predict: torch.Tensor, draft_tokens: torch.Tensor) -> tuple:
    """(accepted drafts, bonus) of a greedy accept of the drafts against the target's own
    predictions."""
    from specplan.runtime.kernels import greedy_accept

    _, correct, bonus = greedy_accept(draft_tokens[:, 1:], predict)
    return correct.to(torch.int32), bonus.to(torch.int64)


def _past(commit: torch.Tensor, width: int) -> torch.Tensor:
    """[bs, width] True at the columns past each row's commit length."""
    return torch.arange(width, device=commit.device)[None, :] >= commit.to(torch.int64)[:, None]


def _path_commit(dec: dict, predict: torch.Tensor, index: torch.Tensor, correct: torch.Tensor,
                 prefix: torch.Tensor) -> Accepted:
    correct = correct.to(torch.int32)
    index = index.to(torch.int64)  # [bs, num_steps + 1], -1 past the path
    predict = predict.to(torch.int64)
    out = torch.where(index >= 0, predict[index.clamp(min=0)], torch.full_like(index, -1))
    commit = correct + 1
    return Accepted(dec, commit, (prefix + commit).to(torch.int32), out)
