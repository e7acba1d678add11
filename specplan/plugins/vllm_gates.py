"""The vLLM plugin's per-step gate guard (issue 34 item 5; docs/gates.md, "The plugins").

A gate is a decision whose value selects the collectives a rank issues next
(engines/vllm/gates.py has vLLM's). vLLM agrees two of them over a group narrower than the
plan's, and trusts the rest of the union to hold the same inputs:

- `step_batch_descriptor` (with `skip_drafts`): the step's CUDA-graph descriptor and DP padding,
  agreed by the 7 x dp cpu all-reduce over the DP group
  (v1/worker/gpu/dp_utils.py sync_cudagraph_and_dp_padding). Each TP rank of a DP rank runs
  its own copy of that all-reduce, over its own DP group, trusting the replica's one
  SchedulerOutput to give every TP rank the same batch. The plan agrees the gate over ep (the
  stage: dp x tp). The hook on sync_cudagraph_and_dp_padding all-gathers this rank's inputs
  (DP rank, token and request counts, uniform length, max query length, micro-batching and
  skip-drafts votes, wanted graph mode) over the plan's group first: ranks feeding one DP
  rank's column with different batches are a GateMismatch naming the gate, the group and the
  ranks (no padding can make their collectives match); the graph mode, which a rank may want
  for reasons of its own (a prefill, an encoder input, a failed capture), is agreed as vLLM
  agrees it over DP, over the whole group: any rank eager, all eager. Every rank of the group
  then reaches one descriptor. dispatch_cg_and_sync_dp calls the function through its module,
  so every caller (the target step, the MTP / target-dependent drafters) meets the hook.
- `batch_shard_owner`: batch-sharded sampling's owner rows (request slot % tp), computed by
  every TP rank from its own idx_mapping without communication
  (v1/worker/gpu/sample/batch_shard.py BatchSharder.shard_sampler_inputs). The hook all-gathers
  over the plan's group (tp) the request count and digests of idx_mapping and cu_num_logits
  before vLLM builds its shard plan; a difference is a GateMismatch naming the ranks (their
  all_to_all splits and gathered rows would differ; slots are per-rank state, so no value can
  be agreed in their place).

Cost: one int64 all-gather of 8 (3) words per DP-synced step (per sharded sample) over the
plan's group, on vLLM's cpu group for it where vLLM has one, else the plan's own. A plan
without the gate (dp 1 dense, no sharded sampling) installs the hooks and runs vLLM's code
alone. A GateMismatch ends the rank under the guard (vllm_guard.py, exit 3).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any
from dataclasses import dataclass, replace

from specplan.plugins.roles import serves

if TYPE_CHECKING:
    from specplan.runtime.errors import GateMismatch

STEP, OWNER = "step_batch_descriptor", "batch_shard_owner"
GUARDED = (STEP, OWNER)
# sync_cudagraph_and_dp_padding's inputs, in the order they are gathered (after the DP rank)
STEP_FIELDS = ("num_tokens", "num_reqs", "uniform_token_count", "max_query_len",
               "allow_ubatching", "allow_skip_drafts")
OWNER_FIELDS = ("num_reqs", "crc32(idx_mapping)", "crc32(cu_num_logits)")


@dataclass
class GateGroup:
    """Where one gate is checked on this rank: the plan's family, its ranks and a group."""

    gate: str
    function: str
    family: str
    ranks: list[int]
    group: Any
    device: Any = None
    rank: int = 0

    def gather(self, row: list[int]) -> list[list[int]]:
        import torch
        import torch.distributed as dist

        mine = torch.tensor(row, dtype=torch.int64, device=self.device)
        out = [torch.empty_like(mine) for _ in self.ranks]
        dist.all_gather(out, mine, group=self.group)
        return [[int(v) for v in t.tolist()] for t in out]

    def mismatch(self, what: str, sides: str) -> GateMismatch:
        from specplan.runtime.errors import GateMismatch

        return GateMismatch(f"gate {self.gate} (decode, agreed over {self.family} {self.ranks}): "
                            f"{what} ({sides}; this is rank {self.rank}): vLLM's ranks would issue "
                            f"the collectives it selects with different shapes, or wait on one a "
                            f"peer never issues ({self.function})")


def gate_groups(plan, rank: int, coordinators: dict, world, runtime) -> dict[str, GateGroup]:
    """The guarded gates of `plan` with a family, each on vLLM's cpu group that is exactly the
    plan's group (a coordinator's or the world's), else the runtime's group for the family."""
    out = {}
    for gate in plan.gates:
        if gate.name not in GUARDED or gate.family is None:
            continue
        ranks = sorted(plan.group_of(gate.family, rank))
        if len(ranks) < 2:
            continue
        found = next((c for c in [*coordinators.values(), world]
                      if c is not None and sorted(c.ranks) == ranks), None)
        if found is not None:
            where = GateGroup(gate.name, gate.function, gate.family, ranks, found.cpu_group, "cpu", rank)
        else:
            where = GateGroup(gate.name, gate.function, gate.family, ranks,
                              runtime.groups[gate.family], runtime.device, rank)
        out[gate.name] = where
    return out


def _sides(ranks: list[int], rows: list[list[int]], names: tuple[str, ...]) -> str:
    return "; ".join(f"rank {r}: " + ", ".join(f"{n} {v}" for n, v in zip(names, row))
                     for r, row in zip(ranks, rows))


def _digest(array) -> int:
    import numpy as np

    return zlib.crc32(np.ascontiguousarray(array, dtype=np.int64).tobytes())


class GateHooks:
    """VllmState's gate bodies (mixed in): its `gate_where` is set at start (gate_groups)."""

    gate_where: dict[str, GateGroup]

    @serves("dp_sync")
    def sync_step(self, original, *args, **kwargs):
        """Check the DP rank's inputs alike over the plan's group, agree the graph mode over it,
        then vLLM's own DP sync."""
        where = self.gate_where.get(STEP)
        if where is None:
            return original(*args, **kwargs)
        import inspect

        call = inspect.signature(original).bind(*args, **kwargs)
        call.apply_defaults()
        a = call.arguments
        desired = a["desired_batch_desc"]
        row = [int(a["dp_rank"]), int(a["num_tokens"]), int(a["num_reqs"]),
               int(a["uniform_token_count"] or 0), int(-1 if a["max_query_len"] is None else a["max_query_len"]),
               int(bool(a["allow_ubatching"])), int(bool(a.get("allow_skip_drafts", False))),
               int(desired.cg_mode.value)]
        rows = where.gather(row)
        for dp_rank in sorted({r[0] for r in rows}):
            peers = [(rk, r) for rk, r in zip(where.ranks, rows) if r[0] == dp_rank]
            if len({tuple(r[1:7]) for _, r in peers}) > 1:
                raise where.mismatch(
                    f"ranks {[rk for rk, _ in peers]} run DP rank {dp_rank}'s step with different "
                    "batches", _sides([rk for rk, _ in peers], [r[1:7] for _, r in peers], STEP_FIELDS))
        agreed = min(r[7] for r in rows)
        if agreed != row[7]:
            a["desired_batch_desc"] = replace(desired, cg_mode=type(desired.cg_mode)(agreed))
        return original(*call.args, **call.kwargs)

    @serves("batch_shard")
    def shard_batch(self, original, sharder, input_batch, grammar_output):
        """Check the owner rows' inputs alike over the plan's group, then vLLM's sharding."""
        where = self.gate_where.get(OWNER)
        if where is not None:
            row = [int(len(input_batch.idx_mapping_np)), _digest(input_batch.idx_mapping_np),
                   _digest(input_batch.cu_num_logits_np)]
            rows = where.gather(row)
            if len({tuple(r) for r in rows}) > 1:
                raise where.mismatch("ranks hold different request slots or logits counts, so "
                                     "they assign different owner rows",
                                     _sides(where.ranks, rows, OWNER_FIELDS))
        return original(sharder, input_batch, grammar_output)
