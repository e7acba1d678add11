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
    out_tokens: torch.Tensor  # [bs, num_steps + 1] int64, -1 or stale past commit_lens
    cap_trim_lens: torch.Tensor | None = None


def derive_commit(site: str, dec: dict, prefix: torch.Tensor, draft_tokens: torch.Tensor | None = None,
                  verify_lens: torch.Tensor | None = None) -> Accepted:
    """What an accept site commits, from converged decisions only, so every rank commits the same.

    DSpark / DFlash style (correct_len, bonus): `finalize_accept` with the round's drafts.
    EAGLE style (predict, accept_index, num_correct_drafts): tokens gathered along the path.
    """
    by_prefix = {k.rsplit("_", 1)[0] if k.endswith(("_greedy", "_sample")) else k: v
                 for k, v in dec.items()}
    if "num_correct_drafts" in by_prefix:
        return _eagle_commit(dec, by_prefix, prefix)
    if draft_tokens is None:
        raise ValueError(f"{site}: finalizing a chain accept needs this round's draft_tokens")
    correct = by_prefix.get("correct_len", by_prefix.get("accept_len"))
    commit, seq, trim, out = finalize_accept(correct, by_prefix["bonus"], prefix, draft_tokens,
                                             verify_lens)
    return Accepted(dec, commit, seq, out, by_prefix.get("cap_trim_lens", trim))


def _eagle_commit(dec: dict, by_prefix: dict, prefix: torch.Tensor) -> Accepted:
    correct = by_prefix["num_correct_drafts"].to(torch.int32)
    index = by_prefix["accept_index"].to(torch.int64)  # [bs, num_steps + 1], -1 past the path
    predict = by_prefix["predict"].to(torch.int64)
    out = torch.where(index >= 0, predict[index.clamp(min=0)], torch.full_like(index, -1))
    commit = correct + 1
    return Accepted(dec, commit, (prefix + commit).to(torch.int32), out)
