"""The Runtime an engine holds: fused converges with guard headers, relays, probe, accept.

One preallocated uint8 buffer per family (the largest guarded collective of the family), and
every guarded collective of the family sends all of it, so every buffer of one group has one
size. Everything a converge needs that does not change per call is prepared at bind, per
boundary: its group and source, its expected guard header (id and fingerprint written once),
and per live-rows count a `FusedLayout` (typed views of every field into the buffer, checked
once). A converge then writes the header in place, packs with one `copy_` per field (one Triton
launch on CUDA), runs one collective, compares the header with one equality and returns views
of one private copy of the bytes the fields span. Collectives run async and are waited on with
`runtime.timeout_s`, so a dead or stalled peer becomes a `CollectiveTimeout`, not a hang.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import torch
import torch.distributed as dist

from specplan.runtime import binding as _bind
from specplan.runtime.errors import CollectiveTimeout
from specplan.runtime.guard import GuardHeader, check_header, header_slot, read_header
from specplan.runtime.kernels import FusedLayout, finalize_accept
from specplan.runtime.plan_view import Boundary, PlanView
from specplan.runtime.probe import ProbeState, run_probe
from specplan.runtime.tracing import TraceWriter

DTYPES = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64, "float32": torch.float32}


@dataclass
class Accepted:
    """What an accept boundary commits: the converged decisions and the layout derived from them."""

    decisions: dict[str, torch.Tensor]
    commit_lens: torch.Tensor  # [bs] int32: accepted drafts + the bonus
    new_seq_lens: torch.Tensor  # [bs] int32
    out_tokens: torch.Tensor  # [bs, num_steps + 1] int64, -1 or stale past commit_lens
    cap_trim_lens: torch.Tensor | None = None


class Runtime:
    def __init__(self, plan: PlanView, device: torch.device, backend: str, adopted: dict | None = None):
        self.plan, self.device, self.backend = plan, device, backend
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.groups, self.ranks = _bind.create_groups(plan, backend, adopted)
        self.buffers = {f: torch.zeros(n, dtype=torch.uint8, device=device)
                        for f, n in plan.family_buffer_bytes().items()}
        self._slots = {f: header_slot(buf) for f, buf in self.buffers.items()}
        self.names = {b.id: b.label for b in plan.boundaries + plan.relays}
        # Layouts are fixed by the plan: checked once here (at capacity), so the hot path is
        # a few copies into views made once per boundary and live-rows count.
        self._prep = {b.id: _Prepared(self, b) for b in plan.boundaries + plan.relays}
        self._probe = ProbeState(self)
        self.last_round = -1  # the latest round a converge ran, for errors at close
        self.trace = TraceWriter(plan.trace_dir, self.rank, self.replica) if plan.trace_dir else None

    @property
    def replica(self) -> int:
        fam = self.plan.families.get("replica")
        return fam.locate(self.rank)[0] if fam else 0

    def source_of(self, target) -> int:
        """The global rank whose values a boundary (id or site name) hands to its group."""
        b = self.plan.boundary_of(target)
        return self.ranks[b.family][b.source_member]

    # -- converges -------------------------------------------------------------------------
    def converge(self, target, values: dict | None, *, round: int, live_rows: int,
                 requests=None, seq_lens=None) -> dict[str, torch.Tensor]:
        """Converge one boundary (its id, or any site it carries) and return the source's values.

        `values` maps decision name -> tensor with `live_rows` leading rows (or capacity rows;
        rows past live_rows are padding); required on the source, optional elsewhere. A site
        the plan does not converge (trivial group, or policy off) returns `values` unchanged.
        """
        site = self.plan.sites.get(target) if isinstance(target, str) else None
        if site is not None and site["boundary"] is None:
            out = dict(values or {})
            self._trace(site["name"], out, round, requests, seq_lens)
            return out
        b = self.plan.boundary_of(target)
        self.last_round = round
        out = self._collective(b, values, round, live_rows)
        for s in b.sites:
            mine = {f.decision: out[f.decision] for f in b.fields if f.site == s}
            self._trace(s, mine, round, requests, seq_lens)
        return out

    def relay(self, site: str, values: dict | None, *, round: int, live_rows: int) -> dict:
        """Carry a last-stage site's decisions to the earlier stages over the pp family."""
        r = self.plan.relay_of(site)
        if r is None:
            return dict(values or {})
        if r.op == "ring":
            return self._ring(r, values, round, live_rows)
        return self._collective(r, values, round, live_rows)

    def _collective(self, b: Boundary, values, round_: int, live_rows: int) -> dict:
        p = self._prep[b.id]
        if b.op == "all_reduce_min":
            return self._min(p, values, round_)
        lane = p.lanes.get(live_rows) or p.lane(live_rows)
        header = p.header
        header.set(live_rows, round_)
        if self.rank == p.source:
            header.write(p.slot)
            lane.pack(p.fit(lane, values), check=False)
        work = dist.broadcast(p.buf, src=p.source, group=p.group, async_op=True)
        self._wait(work, b, round_)
        if self.rank != p.source and not header.matches(p.slot):
            self._desync(p, p.source)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _ring(self, r: Boundary, values, round_: int, live_rows: int) -> dict:
        """Stage to stage: the last stage sends to 0, stage s forwards to s + 1 (SGLang's relay)."""
        p = self._prep[r.id]
        ranks, buf = p.ranks, p.buf
        me, last = ranks.index(self.rank), len(ranks) - 1
        lane = p.lanes.get(live_rows) or p.lane(live_rows)
        p.header.set(live_rows, round_)
        if me == last:
            p.header.write(p.slot)
            lane.pack(p.fit(lane, values), check=False)
        else:
            sender = ranks[last] if me == 0 else ranks[me - 1]
            self._wait(dist.irecv(buf, src=sender, group=p.group), r, round_)
            if not p.header.matches(p.slot):
                self._desync(p, sender)
        nxt = 0 if me == last else me + 1
        if nxt < last:
            self._wait(dist.isend(buf, dst=ranks[nxt], group=p.group), r, round_)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _min(self, p: "_Prepared", values, round_: int) -> dict:
        """A MIN reduction over host values (free memory): no header, one dtype per boundary."""
        b = p.b
        dtypes = {f.dtype for f in b.fields}
        assert len(dtypes) == 1, f"boundary {b.id}: all_reduce_min over mixed dtypes {dtypes}"
        lane = p.lanes.get(self.plan.max_batch) or p.lane(self.plan.max_batch)
        p.buf.zero_()
        lane.pack(p.fit(lane, values), check=False)
        work = dist.all_reduce(p.buf.view(DTYPES[dtypes.pop()]), op=dist.ReduceOp.MIN,
                               group=p.group, async_op=True)
        self._wait(work, b, round_)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _desync(self, p: "_Prepared", source: int) -> None:
        check_header(read_header(p.buf), p.header.expected(), p.b, rank=self.rank, source=source,
                     names=self.names)

    def _wait(self, work, b: Boundary, round_: int) -> None:
        what = (f"collective for site {b.label} (boundary {b.id}, {b.op}) at round {round_}"
                if b.id >= 0 else f"{b.label} at round {round_}")
        wait_for(work, what=f"{what} on group {b.family} {self.ranks[b.family]}",
                 timeout_s=self.plan.timeout_s, rank=self.rank)

    # -- accept, probe, trace ----------------------------------------------------------------
    def accept(self, target, values: dict | None, *, round: int, live_rows: int,
               prefix_lens: torch.Tensor, draft_tokens: torch.Tensor | None = None,
               verify_lens: torch.Tensor | None = None, requests=None) -> Accepted:
        """Converge an accept boundary, then derive what the round commits from it.

        DSpark / DFlash style (correct_len, bonus): `finalize_accept` with the round's drafts.
        EAGLE style (predict, accept_index, num_correct_drafts): tokens gathered along the
        accepted path. Both read converged values only, so every rank commits the same.
        """
        dec = self.converge(target, values, round=round, live_rows=live_rows, requests=requests)
        prefix = prefix_lens[:live_rows].to(self.device, torch.int32)
        drafts = None if draft_tokens is None else draft_tokens[:live_rows].to(self.device)
        result = derive_commit(str(target), dec, prefix, drafts, verify_lens)
        if self.trace:
            self.trace.commit(round, requests, prefix, result.new_seq_lens, result.out_tokens,
                              result.commit_lens)
        return result

    def probe(self, round: int, decisions: dict[str, torch.Tensor]) -> None:
        """All ranks of each replica compare a hash of every decision they hold; raises ProbeMismatch."""
        run_probe(self, round, decisions)

    def maybe_probe(self, round: int, decisions: dict[str, torch.Tensor]) -> bool:
        """`probe` every `runtime.probe_every` rounds (0 = never); True when it ran."""
        every = self.plan.probe_every
        if every <= 0 or round % every:
            return False
        run_probe(self, round, decisions)
        return True

    def _trace(self, site: str, values: dict, round_: int, requests, seq_lens) -> None:
        if self.trace:
            self.trace.converge(round_, site, values, requests, seq_lens)

    def barrier(self) -> None:
        """A world-wide meeting point with the plan's timeout (a dead rank raises here)."""
        world = Boundary(-1, "-", "world", "barrier", 0, ("the world barrier",), (), 0, 0)
        self.ranks.setdefault("world", list(range(self.world_size)))
        self._wait(dist.barrier(async_op=True), world, self.last_round)

    def close(self) -> None:
        """Flush the trace, meet every rank once more, and leave the process group."""
        if self.trace:
            self.trace.close()
        try:
            self.barrier()
        finally:
            dist.destroy_process_group()


class _Prepared:
    """What one boundary (or relay) needs per call, made once at bind."""

    __slots__ = ("rt", "b", "buf", "slot", "header", "group", "ranks", "source", "decisions",
                 "lanes", "_shapes")

    def __init__(self, rt: Runtime, b: Boundary):
        self.rt, self.b = rt, b
        guarded = b.op != "all_reduce_min"
        full = rt.buffers[b.family]
        # Guarded collectives send the family's whole buffer (one size per group); the MIN
        # reduction reduces its own values only.
        self.buf = full if guarded else full[: b.buffer_bytes]
        self.slot = rt._slots[b.family]
        self.header = GuardHeader(b.id, rt.plan.fingerprint64)
        self.group, self.ranks = rt.groups[b.family], rt.ranks[b.family]
        self.source = self.ranks[b.source_member]
        self.decisions = b.decisions
        self.lanes: dict[int, FusedLayout] = {}
        self._shapes: dict[int, list[tuple[int, ...]]] = {}
        FusedLayout(self.buf, [(DTYPES[f.dtype], f.shape, f.offset) for f in b.fields])  # checks

    def lane(self, live_rows: int) -> FusedLayout:
        """The layout at `live_rows` (made on first use, then reused every round)."""
        plan = self.rt.plan
        if not 0 <= live_rows <= plan.max_batch:
            raise ValueError(f"{self.b.label}: live_rows {live_rows} is outside 0 .. max_batch "
                             f"{plan.max_batch} (runtime.max_batch fixes the capacity)")
        shapes = [plan.live_shape(f, live_rows) for f in self.b.fields]
        lane = FusedLayout(self.buf, [(DTYPES[f.dtype], s, f.offset) for f, s in zip(self.b.fields, shapes)])
        self.lanes[live_rows] = lane
        return lane

    def fit(self, lane: FusedLayout, values) -> list[torch.Tensor]:
        """The source's tensors for the lane, in field order: each of the field's dtype and live
        shape (capacity rows are cut to the live prefix), on the runtime's device."""
        try:
            tensors = [values[d] for d in self.decisions]
        except (KeyError, TypeError):
            values = values or {}
            missing = [d for d in self.decisions if d not in values]
            raise ValueError(f"{self.b.label} (boundary {self.b.id}): the source must hand over every "
                             f"decision of the boundary; missing {missing}, given {sorted(values)}") from None
        device = self.rt.device
        for i, (t, dtype, shape) in enumerate(zip(tensors, lane.dtypes, lane.shapes)):
            if t.dtype is not dtype or t.shape != shape or (lane.impl == "triton" and t.device != device):
                tensors[i] = _live(t, self.b.fields[i], tuple(shape)).to(device)
        return tensors


def _live(t: torch.Tensor, f, shape: tuple[int, ...]) -> torch.Tensor:
    if t.dtype != DTYPES[f.dtype]:
        raise TypeError(f"{f.site}.{f.decision}: expected dtype {f.dtype}, found {t.dtype}")
    if tuple(t.shape) == shape:
        return t
    if shape and t.dim() == len(shape) and tuple(t.shape[1:]) == shape[1:] and t.shape[0] >= shape[0]:
        return t[: shape[0]]  # capacity rows: the live prefix is the payload
    raise ValueError(f"{f.site}.{f.decision}: expected shape {list(shape)} for these live rows, "
                     f"found {list(t.shape)}")


def wait_for(work, *, what: str, timeout_s: float, rank: int) -> None:
    """Wait on an async collective; a stall or a failed peer becomes a CollectiveTimeout."""
    try:
        done = work.wait(timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        raise CollectiveTimeout(
            f"{what} did not complete within {timeout_s:g}s or a peer failed (this is rank "
            f"{rank}): {str(exc).splitlines()[0]}") from exc
    if done is False:
        raise CollectiveTimeout(f"{what} timed out after {timeout_s:g}s (this is rank {rank})")


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


def bind(plan, *, rank: int | None = None, world_size: int | None = None,
         device: str | torch.device | None = None, groups: dict | None = None) -> Runtime:
    """Bind a plan (path to plan.json, or its content) on this rank.

    `groups` maps family name -> the process group this rank already belongs to (an engine's
    device group per coordinator): bind adopts it instead of creating that family's groups,
    after every rank has checked that its ranks are the plan's group for it (else
    `GroupMismatch` on every rank, naming family, rank and both rank lists). Every rank must
    hand over the same families; the rest are created in plan order on every rank.
    """
    view = PlanView(plan)
    backend = _bind.backend_for(view)
    dev = torch.device(device) if device is not None else _bind.default_device(view)
    _bind.start_process_group(view, rank, world_size, backend)
    adopted, problems = _bind.check_adopted(view, groups)
    _bind.agree_on_plan(view, dev, adopted, problems)
    return Runtime(view, dev, backend, adopted)
