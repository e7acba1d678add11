"""The sim's model collectives over the runtime's groups, each with a timeout and a count.

Tensor parallel: all_reduce over attn_tp (attention) and over the TP block (MLP); under
DP-attention the MLP/MoE first all-gathers every replica's rows across the TP block (padded
to the largest count, which the block all-gathers first), as the engines' dummy-padded
gathers do. Pipeline: point-to-point sends of hidden states and taps between neighbouring
stages of a pp group.

MoE (`EpDispatch`, an all-to-all dispatch and combine over moe_ep): each moe_ep rank holds
experts e with e % ep == its index, each expert's FFN split over moe_tp. Every rank of the
TP block holds the block's rows (gathered first under DP-attention), so the moe_ep ranks
split them evenly (contiguous, in the gathered order; moe_tp peers and moe_dp groups take
the same share) and each routes only its share: an all_to_all of int64 counts [ep, local
experts], then one all_to_all_single of the (row, expert) pairs with split sizes; the owner
computes its experts (all_reduce over moe_tp for the row-parallel down projection), the
reverse all_to_all_single sends the results back, the sender combines each row over its
experts in ascending id with the router weights, and an all_gather over moe_ep rebuilds
every row of the block (under DP-attention each rank then keeps its own rows).
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.distributed as dist

from specplan.runtime.runtime import wait_for
from specplan.sim.model import F64, Dispatch, Shard


class Comm:
    def __init__(self, rt):
        self.rt = rt
        self.round = 0
        self.calls: Counter = Counter()  # per round: collectives
        self.bytes: Counter = Counter()

    def _group(self, family: str):
        return self.rt.groups.get(family), self.rt.ranks.get(family, [self.rt.rank])

    def _wait(self, work, what: str, family: str) -> None:
        wait_for(work, what=f"sim {what} on group {family} {self.rt.ranks.get(family)} at round "
                            f"{self.round}", timeout_s=self.rt.plan.timeout_s, rank=self.rt.rank)

    def _count(self, t: torch.Tensor) -> None:
        self.calls[self.round] += 1
        self.bytes[self.round] += t.numel() * t.element_size()

    def all_reduce(self, x: torch.Tensor, family: str) -> torch.Tensor:
        group, ranks = self._group(family)
        if len(ranks) == 1:
            return x
        x = x.contiguous()
        self._count(x)
        self._wait(dist.all_reduce(x, group=group, async_op=True), "all_reduce", family)
        return x

    def all_gather(self, x: torch.Tensor, family: str) -> list[torch.Tensor]:
        group, ranks = self._group(family)
        if len(ranks) == 1:
            return [x]
        out = [torch.empty_like(x) for _ in ranks]
        self._count(x)
        self._wait(dist.all_gather(out, x.contiguous(), group=group, async_op=True),
                   "all_gather", family)
        return out

    def all_to_all(self, x: torch.Tensor, send: list[int] | None, recv: list[int] | None,
                   family: str) -> torch.Tensor:
        """all_to_all_single over dim 0: send[i] rows to member i, recv[i] rows from it
        (None: equal splits, the output shaped like x)."""
        group, ranks = self._group(family)
        if len(ranks) == 1:
            return x
        x = x.contiguous()
        out = torch.empty_like(x) if recv is None else x.new_empty((sum(recv), *x.shape[1:]))
        self._count(x)
        self._wait(dist.all_to_all_single(out, x, recv, send, group=group, async_op=True),
                   "all_to_all", family)
        return out

    def send(self, x: torch.Tensor, peer: int) -> None:
        self._count(x)
        self._wait(dist.isend(x.contiguous(), dst=peer, group=self.rt.groups["pp"]), "send", "pp")

    def recv(self, shape, peer: int) -> torch.Tensor:
        x = torch.empty(shape, dtype=F64)
        self._count(x)
        self._wait(dist.irecv(x, src=peer, group=self.rt.groups["pp"]), "recv", "pp")
        return x

    # -- DP-attention: the TP block shares rows for the MLP -----------------------------------
    def gather_rows(self, x: torch.Tensor):
        gathered = self.all_gather(torch.tensor([x.shape[0]], dtype=torch.int64), "tp")
        counts = [int(c) for c in gathered]
        pad = max(counts)
        padded = torch.zeros(pad, x.shape[1], dtype=x.dtype)
        padded[: x.shape[0]] = x
        parts = self.all_gather(padded, "tp")
        me = self.rt.ranks["tp"].index(self.rt.rank)
        rows = torch.cat([p[:c] for p, c in zip(parts, counts)])
        start = sum(counts[:me])
        return rows, (start, counts[me])

    @staticmethod
    def own_rows(y: torch.Tensor, ctx) -> torch.Tensor:
        start, n = ctx
        return y[start:start + n]


class EpDispatch(Dispatch):
    """The MoE's all-to-all over moe_ep (see the module doc)."""

    def __init__(self, comm: Comm):
        self.comm = comm
        self.ep, self.index = family_index(comm.rt, "moe_ep")

    def share(self, x: torch.Tensor):
        n = x.shape[0]
        sizes = [n // self.ep + (i < n % self.ep) for i in range(self.ep)]
        start = sum(sizes[: self.index])
        return x[start:start + sizes[self.index]], sizes

    def counts(self, counts: torch.Tensor) -> torch.Tensor:
        return self.comm.all_to_all(counts, None, None, "moe_ep")

    def exchange(self, rows: torch.Tensor, send: list[int], recv: list[int]) -> torch.Tensor:
        return self.comm.all_to_all(rows, send, recv, "moe_ep")

    def unshare(self, y: torch.Tensor, sizes: list[int]) -> torch.Tensor:
        if self.ep == 1:
            return y
        padded = y.new_zeros(max(sizes), y.shape[1])
        padded[: y.shape[0]] = y
        parts = self.comm.all_gather(padded, "moe_ep")
        return torch.cat([p[:c] for p, c in zip(parts, sizes)])


def family_index(rt, family: str) -> tuple[int, int]:
    ranks = rt.ranks.get(family, [rt.rank])
    return len(ranks), ranks.index(rt.rank)


def make_shard(rt, comm: Comm, dp_attention: bool) -> Shard:
    """This rank's Shard: head, MLP and expert slices from its place in the plan's families."""
    attn_family = "attn_tp" if "attn_tp" in rt.ranks else "tp"
    shard = Shard(attn=family_index(rt, attn_family), mlp=family_index(rt, "tp"),
                  experts=(*family_index(rt, "moe_ep"), *family_index(rt, "moe_tp")))
    shard.attn_reduce = lambda x: comm.all_reduce(x, attn_family)
    shard.mlp_reduce = lambda x: comm.all_reduce(x, "tp")
    shard.moe_reduce = lambda x: comm.all_reduce(x, "moe_tp")
    shard.dispatch = EpDispatch(comm)
    if dp_attention:
        shard.mlp_enter = comm.gather_rows
        shard.mlp_leave = comm.own_rows
    return shard
