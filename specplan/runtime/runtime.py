"""The Runtime an engine holds: fused converges with guard headers, relays, probe, accept.

One preallocated uint8 buffer per family (the largest guarded collective of the family), and
every guarded collective of the family sends all of it, so every buffer of one group has one
size. Everything a converge needs that does not change per call is prepared at bind, per
boundary: its group and source, its expected guard header (id and fingerprint written once),
and per live-rows count a `FusedLayout` (typed views of every field into the buffer, checked
once). A converge then writes the header in place, packs with one `copy_` per field (one Triton
launch on CUDA), runs one collective, checks the header and returns one private copy of each
field.

Two hot paths (`bind(hot_path=...)`): on the host path (a CPU's default) the header is compared
on the host right after the collective, which is waited on with `runtime.timeout_s`, so a desync
raises within its round and a dead or stalled peer becomes a `CollectiveTimeout`, not a hang. On
the device path (CUDA / NPU's default) nothing is read back per converge: the header is compared
on the device into a flag that `check_round` reads once, the wait is the backend's own (NCCL
watchdog), packing is one device copy per field and every buffer is made at bind, so a
converge can be captured in a CUDA graph.
"""

from __future__ import annotations

import datetime
import os

import torch
import torch.distributed as dist

from specplan.runtime import binding as _bind, comm
from specplan.runtime.commit import Accepted, accept_site, derive_commit, fired
from specplan.runtime.errors import CollectiveTimeout
from specplan.runtime.guard import (BATCH_WORD, HEADER_WORDS, DeviceFlag, GuardHeader, batch_only,
                                    check_header, header_slot, read_header, words_header)
from specplan.runtime.identity import Identity
from specplan.runtime.batch import Lens, Requests
from specplan.plan.load import PlanSource
from specplan.runtime.plan_view import GuardedCollective, PlanView
from specplan.runtime.prepared import DTYPES, PreparedCollective, accept_sites
from specplan.runtime.probe import ProbeState, run_probe
from specplan.runtime.tracing import TraceWriter

__all__ = ["Accepted", "DTYPES", "Runtime", "accept_site", "accept_sites", "bind", "derive_commit", "fired",
           "wait_for"]


class Runtime:
    """A plan bound on this rank. `hot_path` is "host" (a header mismatch raises right after
    its collective; waits are timed from the host) or "device" (compared on the device, raised
    by `check_round`; waits are the backend's own, see specplan.runtime.guard)."""

    def __init__(self, plan: PlanView, device: torch.device, adopted: dict | None = None,
                 hot_path: str = "host", batch_identity: bool | None = None) -> None:
        self.plan, self.device, self.backend = plan, device, plan.backend
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.groups, self.ranks = comm.create_groups(plan, adopted)
        self.hot_path = hot_path
        on_device = hot_path == "device"
        self.device_flag = DeviceFlag(device) if on_device else None
        # The Triton pack builds its address table on the host per call: not capturable.
        self.pack_impl = "torch" if on_device else "auto"
        self.buffers = {f: torch.zeros(n, dtype=torch.uint8, device=device)
                        for f, n in plan.family_buffer_bytes().items()}
        self._slots = {f: header_slot(buf, device_path=on_device) for f, buf in self.buffers.items()}
        self.names = {b.id: b.label for b in plan.boundaries + plan.relays}
        # Layouts are fixed by the plan: checked once here (at capacity), so the hot path is
        # a few copies into views made once per boundary and live-rows count.
        self._prep = {b.id: PreparedCollective(self, b) for b in plan.boundaries + plan.relays}
        self._probe = ProbeState(self)
        self.last_round = -1  # the latest round a converge ran, for errors at close
        # Batch identity (runtime.batch_identity, or bind's override): the header's batch word.
        self.batch_identity = plan.batch_identity if batch_identity is None else batch_identity
        self.identity = Identity(self, self.batch_identity)
        trace_dir = plan.trace_dir or os.environ.get("SPECPLAN_TRACE_DIR")
        self.trace = (TraceWriter(trace_dir, self.rank, self.replica, plan.fingerprint)
                      if trace_dir else None)

    @property
    def replica(self) -> int:
        fam = self.plan.families.get("replica")
        return fam.locate(self.rank)[0] if fam else 0

    def wire_bytes(self, b: GuardedCollective) -> int:
        """The bytes one call of a boundary or relay sends (the buffer it was bound with)."""
        return self._prep[b.id].buf.numel()

    # -- converges -------------------------------------------------------------------------
    def converge(self, target: int | str, values: dict | None, *, round: int, live_rows: int,
                 requests: Requests = None, seq_lens: Lens | None = None) -> dict[str, torch.Tensor]:
        """Converge one boundary (its id, or any site it carries) and return the source's values.

        `values` maps decision name -> tensor with `live_rows` leading rows (or capacity rows;
        rows past live_rows are padding); required on the source, optional elsewhere. A site
        the plan does not converge (trivial group, or policy off) returns `values` unchanged.
        `requests`: the rows' identities, in row order: a `batch.Batch(request ids,
        generations)`, a pair (ids, generations), or ids alone (generation 0); every rank of
        the group must hold the same, else `BatchMismatch` (specplan/runtime/batch.py).
        """
        site = self.plan.sites.get(target) if isinstance(target, str) else None
        if site is not None and site.boundary is None:
            out = dict(values or {})
            self._trace(site.name, out, round, requests, seq_lens)
            return out
        b = self.plan.boundary_of(target)
        self.last_round = round
        out = self._collective(b, values, round, live_rows, requests)
        for s in b.sites:
            mine = {f.decision: out[f.decision] for f in b.fields if f.site == s}
            self._trace(s, mine, round, requests, seq_lens)
        return out

    def relay(self, site: str, values: dict | None, *, round: int, live_rows: int,
              requests: Requests = None) -> dict:
        """Carry a last-stage site's decisions to the earlier stages over the pp family.

        `round` and `requests` are those of the round the relay was sent for: a stage that
        consumes it k rounds later passes the batch it held for that round
        (`batch.BatchHistory`), and is checked against it."""
        r = self.plan.relay_of(site)
        if r is None:
            return dict(values or {})
        if r.op == "ring":
            return self._ring(r, values, round, live_rows, requests)
        return self._collective(r, values, round, live_rows, requests)

    def _collective(self, b: GuardedCollective, values, round_: int, live_rows: int, requests=None) -> dict:
        p = self._prep[b.id]
        if b.op == "all_reduce_min":
            return self._min(p, values, round_)
        lane = p.lanes.get(live_rows) or p.lane(live_rows)
        header = p.header
        header.set(live_rows, round_)
        self.identity.stamp(p, requests, round_, live_rows)
        if self.rank == p.source:
            header.write(p.slot)
            lane.pack(p.fit(lane, values), check=False)
        work = dist.broadcast(p.sent(live_rows), src=p.source, group=p.group, async_op=True)
        self._hot_wait(work, b, round_)
        if p.peer_runtime_width and self.rank != p.source:
            # The plan lets the sender pick its width at run time (payload_width: dynamic) while
            # this rank expects the planned count. NCCL keeps such a receiver waiting for the
            # rest (gloo would complete a short message silently): wait for it, as NCCL does.
            rest = p.buf[p.sent_bytes(live_rows):]
            self._hot_wait(dist.broadcast(rest, src=p.source, group=p.group, async_op=True), b, round_)
        if self.rank != p.source and not header.matches(p.slot):
            self._desync(p, p.source, round_)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _ring(self, r: GuardedCollective, values, round_: int, live_rows: int, requests=None) -> dict:
        """Stage to stage: the last stage sends to 0, stage s forwards to s + 1 (SGLang's relay)."""
        p = self._prep[r.id]
        ranks, buf = p.ranks, p.buf
        me, last = ranks.index(self.rank), len(ranks) - 1
        lane = self._stamp(p, round_, live_rows, requests)
        if me == last:
            p.header.write(p.slot)
            lane.pack(p.fit(lane, values), check=False)
        else:
            sender = ranks[last] if me == 0 else ranks[me - 1]
            self._hot_wait(dist.irecv(buf, src=sender, group=p.group), r, round_)
            if me == 0 and p.runtime_width:
                # From the last stage at its run-time width (payload_width: dynamic) into the
                # planned count: wait for the rest, as NCCL does (gloo completes it short).
                rest = buf[p.sent_bytes(live_rows):]
                self._hot_wait(dist.irecv(rest, src=sender, group=p.group), r, round_)
            if not p.header.matches(p.slot):
                self._desync(p, sender, round_)
        nxt = 0 if me == last else me + 1
        if nxt < last:
            self._hot_wait(dist.isend(p.sent(live_rows), dst=ranks[nxt], group=p.group), r, round_)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    # -- a relay carried in the engine's own message -------------------------------------------
    def relay_out(self, site: str, values: dict, *, round: int, live_rows: int,
                  requests: Requests = None) -> torch.Tensor:
        """The sending half of a site's relay, for an engine that carries it stage to stage in
        its own message (SGLang's PP output dict): the relay's guarded bytes, header (site,
        live rows, round, fingerprint, batch digest) and the site's decisions, in a private
        uint8 tensor the engine may send asynchronously (the header and the live rows of each
        field, not the family's whole buffer). Nothing is sent here."""
        p = self._prep[self._relay(site).id]
        lane = self._stamp(p, round, live_rows, requests)
        p.header.write(p.slot)
        lane.pack(p.fit(lane, values), check=False)
        return p.buf[: p.sent_bytes(live_rows)].clone()

    def relay_in(self, site: str, wire: torch.Tensor, *, round: int, live_rows: int,
                 requests: Requests = None) -> dict[str, torch.Tensor]:
        """The receiving half: `wire` is what `relay_out` made on the previous stage. Its header
        is checked against this stage's own round, live rows and rows (`requests`, those of the
        batch the message answers) as a relay's would be (DesyncError / BatchMismatch, on the
        device path at `check_round`), then the site's decisions are returned."""
        r = self._relay(site)
        p = self._prep[r.id]
        lane = self._stamp(p, round, live_rows, requests)
        n = min(p.buf.numel(), wire.numel())  # another plan's width: its header says whose
        p.buf[:n].copy_(wire.reshape(-1)[:n].to(p.buf.device, torch.uint8))
        if not p.header.matches(p.slot):
            me = p.ranks.index(self.rank)
            self._desync(p, p.ranks[me - 1], round)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _relay(self, site: str) -> GuardedCollective:
        r = self.plan.relay_of(site)
        if r is None:
            raise KeyError(f"plan {self.plan.name!r} relays no site {site!r} "
                           f"(its relays: {sorted(b.label for b in self.plan.relays)})")
        return r

    def _stamp(self, p: PreparedCollective, round_: int, live_rows: int, requests):
        """The call's expected header (live rows, round, batch digest); its layout."""
        lane = p.lanes.get(live_rows) or p.lane(live_rows)
        p.header.set(live_rows, round_)
        self.identity.stamp(p, requests, round_, live_rows)
        return lane

    def _min(self, p: PreparedCollective, values, round_: int) -> dict:
        """A MIN reduction over host values (free memory): no header, one dtype per boundary."""
        b = p.b
        dtypes = {f.dtype for f in b.fields}
        assert len(dtypes) == 1, f"boundary {b.id}: all_reduce_min over mixed dtypes {dtypes}"
        lane = p.lanes.get(self.plan.max_batch) or p.lane(self.plan.max_batch)
        p.buf.zero_()
        lane.pack(p.fit(lane, values), check=False)
        work = dist.all_reduce(p.buf.view(DTYPES[dtypes.pop()]), op=dist.ReduceOp.MIN,
                               group=p.group, async_op=True)
        self._hot_wait(work, b, round_)
        return dict(zip(p.decisions, lane.unpack(copy=True)))

    def _desync(self, p: PreparedCollective, source: int, round_: int) -> None:
        assert isinstance(p.header, GuardHeader)  # a DeviceGuard always matches: the flag reports
        got, expected = read_header(p.buf), p.header.expected()
        if batch_only(got, expected):  # the same call over different rows: name them
            self.identity.mismatch(p.b, round_, p.source, expected[BATCH_WORD + 1], got[BATCH_WORD + 1])
        check_header(got, expected, p.b, rank=self.rank, source=source, names=self.names)

    def _what(self, b: GuardedCollective, round_: int) -> str:
        what = (f"collective for site {b.label} (boundary {b.id}, {b.op}) at round {round_}"
                if b.id >= 0 else f"{b.label} at round {round_}")
        return f"{what} on group {b.family} {self.ranks[b.family]}"

    def _wait(self, work, b: GuardedCollective, round_: int) -> None:
        try:
            wait_for(work, what=self._what(b, round_), timeout_s=self.plan.timeout_s, rank=self.rank)
        except CollectiveTimeout as exc:  # a peer may have left on a BatchMismatch: say so
            raise CollectiveTimeout(f"{exc}{self.identity.reported()}") from exc

    def _hot_wait(self, work, b: GuardedCollective, round_: int) -> None:
        """A converge's wait. Device path: no host timer (NCCL's wait with a timeout polls from
        the host); `wait()` orders the current stream after the collective and the backend's
        own timeout (NCCL watchdog, gloo's) ends a stalled one."""
        if self.device_flag is None:
            self._wait(work, b, round_)
            return
        try:
            work.wait()
        except RuntimeError as exc:
            raise CollectiveTimeout(
                f"{self._what(b, round_)} failed or timed out in the backend (this is rank "
                f"{self.rank}): {str(exc).splitlines()[0]}{self.identity.reported()}") from exc

    # -- the device path's one read per round ------------------------------------------------
    def set_round(self, round: int) -> None:
        """Device path: write the round every guard compares (a converge does it itself; an
        engine replaying a captured converge calls this before the replay)."""
        if self.device_flag is not None:
            self.device_flag.set_round(round)

    def check_round(self) -> None:
        """Raise DesyncError (BatchMismatch when only the batch word differs) for a header
        mismatch recorded on the device since the last check.

        Device path: the one host read of a round (a few bytes); call it where the engine
        synchronises anyway. The probe and close call it too. Host path: nothing to do, a
        mismatch already raised within its round.
        """
        hit = self.device_flag.read() if self.device_flag is not None else None
        if hit is None:
            return
        n = HEADER_WORDS
        expected, got = words_header(hit[1: 1 + n]), words_header(hit[1 + n: 1 + 2 * n])
        when, p = " (compared on the device, read at check_round)", self._prep[expected[0]]
        if batch_only(got, expected):
            self.identity.mismatch(p.b, expected[2], p.source, expected[BATCH_WORD + 1],
                                   got[BATCH_WORD + 1], when)
        check_header(got, expected, p.b, rank=self.rank, source=hit[-1], names=self.names, when=when)

    # -- accept, probe, trace ----------------------------------------------------------------
    def accept(self, target: int | str, values: dict | None, *, round: int, live_rows: int,
               prefix_lens: torch.Tensor, draft_tokens: torch.Tensor | None = None,
               verify_lens: torch.Tensor | None = None, requests: Requests = None) -> Accepted:
        """Converge an accept boundary, then derive what the round commits from it.

        DSpark / DFlash style (correct_len, bonus): `finalize_accept` with the round's drafts.
        EAGLE style (predict, accept_index, num_correct_drafts): tokens gathered along the
        accepted path. Both read converged values only, so every rank commits the same.
        """
        dec = self.converge(target, values, round=round, live_rows=live_rows, requests=requests)
        prefix = prefix_lens[:live_rows].to(self.device, torch.int32)
        drafts = None if draft_tokens is None else draft_tokens[:live_rows].to(self.device)
        name, mine = fired(self.plan.sites, target, dec)
        result = derive_commit(accept_site(self.plan.plan, name), mine, prefix, drafts, verify_lens)
        if self.trace:
            self.trace.commit(round, requests, prefix, result.new_seq_lens, result.out_tokens,
                              result.commit_lens)
            self.trace.acceptance(round, requests, result.commit_lens)
        return result

    def record_acceptance(self, round: int, requests: Requests, accepted_lens: Lens) -> None:
        """Trace, per request, the tokens it committed this round (accepted drafts + the bonus),
        for an engine that derives its commit itself (`accept` records its own). `requests`:
        the engine's request ids, in row order; `accepted_lens`: ints or a tensor, one per row.
        Nothing happens (and nothing is read back) when tracing is off."""
        if self.trace:
            self.trace.acceptance(round, requests, accepted_lens)

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
        world = GuardedCollective(-1, "-", "world", "barrier", 0, ("the world barrier",), (), 0, 0)
        self.ranks.setdefault("world", list(range(self.world_size)))
        self._wait(dist.barrier(async_op=True), world, self.last_round)

    def close(self) -> None:
        """Flush the trace, raise a desync still on the device, meet every rank once more, and
        leave the process group."""
        if self.trace:
            self.trace.close()
        try:
            self.check_round()
            self.barrier()
        finally:
            self.identity.close()
            dist.destroy_process_group()


def wait_for(work: dist.Work, *, what: str, timeout_s: float, rank: int) -> None:
    """Wait on an async collective; a stall or a failed peer becomes a CollectiveTimeout."""
    try:
        done = work.wait(timeout=datetime.timedelta(seconds=timeout_s))
    except RuntimeError as exc:
        raise CollectiveTimeout(
            f"{what} did not complete within {timeout_s:g}s or a peer failed (this is rank "
            f"{rank}): {str(exc).splitlines()[0]}") from exc
    if done is False:
        raise CollectiveTimeout(f"{what} timed out after {timeout_s:g}s (this is rank {rank})")


def bind(plan: PlanSource, *, rank: int | None = None, world_size: int | None = None,
         device: str | torch.device | None = None, groups: dict | None = None,
         hot_path: str = "auto", batch_identity: bool | None = None,
         rendezvous_s: float | None = None) -> Runtime:
    """Bind a plan (path to plan.json, or its content) on this rank.

    `groups` maps family name -> the process group this rank already belongs to (an engine's
    device group per coordinator): bind adopts it instead of creating that family's groups,
    after every rank has checked that its ranks are the plan's group for it (else
    `GroupMismatch` on every rank, naming family, rank and both rank lists). Every rank must
    hand over the same families; the rest are created in plan order on every rank.

    `hot_path`: "auto" (device on CUDA / NPU, host on a CPU), "host" or "device" (forced, e.g.
    on a CPU to test the device path); see `Runtime.check_round`.

    `batch_identity`: None (the plan's `runtime.batch_identity`), True or False (forced): whether
    the guard header carries the digest of the rows' (request, generation).

    `rendezvous_s`: how long the process-group start waits for every rank (default: the
    plan's runtime.timeout_s).
    """
    view = PlanView(plan)
    dev = torch.device(device) if device is not None else _bind.default_device(view)
    comm.start_process_group(view, rank, world_size, rendezvous_s)
    adopted, problems = _bind.check_adopted(view, groups)
    _bind.agree_on_plan(view, dev, adopted, problems)
    return Runtime(view, dev, adopted, _bind.hot_path_for(hot_path, dev), batch_identity)
