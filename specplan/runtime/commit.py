"""What an accept site commits, derived from converged decisions only (so every rank commits
the same): `Runtime.accept` and the generated programs' `finalize` step both call this."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specplan.runtime.kernels import finalize_accept


@dataclass
class Accepted:
    """What an accept boundary commits: the converged decisions and the layout derived from them."""

    decisions: dict[str, torch.Tensor]
    commit_lens: torch.Tensor  # [bs] int32: accepted drafts + the bonus
    new_seq_lens: torch.Tensor  # [bs] int32
    out_tokens: torch.Tensor  # [bs, num_steps + 1] int64, -1 past commit_lens (never a token id)
    cap_trim_lens: torch.Tensor | None = None


def fired(sites: dict, target, dec: dict) -> dict:
    """The decisions of the accept site that fired: all of `dec` for a boundary of one accept
    site; for alternatives (a mixed batch) the named site's, which the caller must name."""
    site = sites.get(target) if isinstance(target, str) else None
    if site is None:
        names = {f for s in sites.values() if s.phase == "accept" for f in
                 (d.name for d in s.decisions) if f in dec}
        alternatives = {s.name for s in sites.values() if s.phase == "accept"
                        and any(d.name in names for d in s.decisions)}
        if len(alternatives) > 1:
            raise ValueError(f"boundary {target} carries the alternative accept sites "
                             f"{sorted(alternatives)}: name the site that fired this round")
        return dec
    mine = {d.name for d in site.decisions}
    return {k: v for k, v in dec.items() if k in mine}


def derive_commit(site: str, dec: dict, prefix: torch.Tensor, draft_tokens: torch.Tensor | None = None,
                  verify_lens: torch.Tensor | None = None) -> Accepted:
    """What an accept site commits, from converged decisions only, so every rank commits the same.

    DSpark / DFlash style (correct_len, bonus): `finalize_accept` with the round's drafts.
    DFlash greedy (target_predict): `greedy_accept` of the drafts first.
    EAGLE style (predict, accept_index, num_correct_drafts): tokens gathered along the path.
    `Accepted.out_tokens` holds -1 past each row's commit_lens (never a valid token id).
    """
    by_prefix = {k.rsplit("_", 1)[0] if k.endswith(("_greedy", "_sample")) else k: v
                 for k, v in dec.items()}
    if "num_correct_drafts" in by_prefix:
        return _eagle_commit(dec, by_prefix, prefix)
    if draft_tokens is None:
        raise ValueError(f"{site}: finalizing a chain accept needs this round's draft_tokens")
    if "target_predict" in by_prefix:
        by_prefix = _greedy_from_predict(by_prefix, draft_tokens)
        draft_tokens = draft_tokens[:, 1:]  # DFlash: column 0 is the root, not a draft
    correct = by_prefix.get("correct_len", by_prefix.get("accept_len"))
    commit, seq, trim, out = finalize_accept(correct, by_prefix["bonus"], prefix, draft_tokens,
                                             verify_lens)
    out = out.masked_fill(_past(commit, out.shape[1]), -1)
    return Accepted(dec, commit, seq, out, by_prefix.get("cap_trim_lens", trim))


def _greedy_from_predict(by_prefix: dict, draft_tokens: torch.Tensor) -> dict:
    from specplan.runtime.kernels import greedy_accept

    _, correct, bonus = greedy_accept(draft_tokens[:, 1:], by_prefix["target_predict"])
    return dict(by_prefix, correct_len=correct.to(torch.int32), bonus=bonus.to(torch.int64))


def _past(commit: torch.Tensor, width: int) -> torch.Tensor:
    """[bs, width] True at the columns past each row's commit length."""
    return torch.arange(width, device=commit.device)[None, :] >= commit.to(torch.int64)[:, None]


def _eagle_commit(dec: dict, by_prefix: dict, prefix: torch.Tensor) -> Accepted:
    correct = by_prefix["num_correct_drafts"].to(torch.int32)
    index = by_prefix["accept_index"].to(torch.int64)  # [bs, num_steps + 1], -1 past the path
    predict = by_prefix["predict"].to(torch.int64)
    out = torch.where(index >= 0, predict[index.clamp(min=0)], torch.full_like(index, -1))
    commit = correct + 1
    return Accepted(dec, commit, (prefix + commit).to(torch.int32), out)
