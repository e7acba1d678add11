"""What one boundary (or relay) of a bound Runtime needs per call, made once at bind."""

from __future__ import annotations

import torch

from specplan.ir.nodes import ROUNDS
from specplan.plan import ABSENT
from specplan.runtime.errors import WireMismatch
from specplan.runtime.guard import HEADER_BYTES, HEADER_SLOTS, DeviceGuard, GuardHeader
from specplan.runtime.kernels import FusedLayout
from specplan.runtime.plan_view import GuardedCollective

DTYPES = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64, "float32": torch.float32}


class PreparedCollective:
    """What one boundary (or relay) needs per call, made once at bind."""

    __slots__ = ("rt", "b", "buf", "slot", "header", "group", "ranks", "source", "decisions",
                 "lanes", "_shapes", "runtime_width", "peer_runtime_width")

    def __init__(self, rt, b: GuardedCollective):
        self.rt, self.b = rt, b
        # The plan states what each collective sends: a guarded one the family's whole buffer
        # (one size per group), a MIN reduction its own values only.
        self.buf = rt.buffers[b.family][: b.buffer_bytes]
        if b.op != "all_reduce_min" and (b.header_bytes, b.header) != (HEADER_BYTES, HEADER_SLOTS):
            raise WireMismatch(f"{b.label} (boundary {b.id}): plan.json lays the guard header out as "
                               f"{list(b.header)} in {b.header_bytes} bytes; this runtime writes "
                               f"{list(HEADER_SLOTS)} in {HEADER_BYTES}")
        self.slot = rt._slots[b.family]
        self.group, self.ranks = rt.groups[b.family], rt.ranks[b.family]
        self.source = self.ranks[b.source_member]
        flag = rt.device_flag
        self.header = (DeviceGuard(b.id, rt.plan.fingerprint64, self.source, flag, rt.device)
                       if flag is not None else GuardHeader(b.id, rt.plan.fingerprint64))
        self.decisions = b.decisions
        self.lanes: dict[int, FusedLayout] = {}
        self._shapes: dict[int, list[tuple[int, ...]]] = {}
        self.runtime_width = _runtime_width(rt, b, rt.plan.stage_of(self.source))
        self.peer_runtime_width = self.runtime_width and rt.rank != self.source
        FusedLayout(self.buf, [(DTYPES[f.dtype], f.shape, f.offset) for f in b.fields])  # checks

    def lane(self, live_rows: int) -> FusedLayout:
        """The layout at `live_rows` (made on first use, then reused every round)."""
        plan = self.rt.plan
        if not 0 <= live_rows <= plan.max_batch:
            raise ValueError(f"{self.b.label}: live_rows {live_rows} is outside 0 .. max_batch "
                             f"{plan.max_batch} (runtime.max_batch fixes the capacity)")
        shapes = [plan.live_shape(f, live_rows) for f in self.b.fields]
        lane = FusedLayout(self.buf, [(DTYPES[f.dtype], s, f.offset) for f, s in zip(self.b.fields, shapes)],
                           impl=self.rt.pack_impl)
        self.lanes[live_rows] = lane
        return lane

    def sent(self, live_rows: int) -> torch.Tensor:
        """What this rank puts on the wire: the family's whole buffer, as planned; where the
        plan leaves this rank's width to run time (payload_width: dynamic, bytes None) the
        sender's actual width, header and live rows only, as such an engine sends it."""
        if not self.runtime_width:
            return self.buf
        return self.buf[: self.sent_bytes(live_rows)]

    def sent_bytes(self, live_rows: int) -> int:
        """The sender's actual width: the header and the live rows of every field."""
        plan = self.rt.plan
        return max(f.offset + _numel(plan.live_shape(f, live_rows)) * DTYPES[f.dtype].itemsize
                   for f in self.b.fields)

    def fit(self, lane: FusedLayout, values) -> list[torch.Tensor]:
        """The source's tensors for the lane, in field order: each of the field's dtype and live
        shape (capacity rows are cut to the live prefix), on the runtime's device."""
        try:
            tensors = [values[d] for d in self.decisions]
        except (KeyError, TypeError):
            tensors = self._unfired(lane, values or {})
        device = self.rt.device
        for i, (t, dtype, shape) in enumerate(zip(tensors, lane.dtypes, lane.shapes)):
            if t.dtype is not dtype or t.shape != shape or (lane.impl == "triton" and t.device != device):
                tensors[i] = _live(t, self.b.fields[i], tuple(shape)).to(device)
        return tensors


    def _unfired(self, lane: FusedLayout, values: dict) -> list[torch.Tensor]:
        """A round fires one of its accept sites (a mixed batch: greedy when every row is
        greedy, else sampled); the buffer still carries the others, sent as zeros. Any other
        missing decision is the source's mistake."""
        sites, given = self.rt.plan.sites, set(values)
        bad = [f.decision for f in self.b.fields if f.decision not in given
               and (len(accept_sites(sites, sites[f.site].round)) < 2
                    or any(g.decision in given for g in self.b.fields if g.site == f.site))]
        if bad:
            raise ValueError(f"{self.b.label} (boundary {self.b.id}): the source must hand over every "
                             f"decision of the boundary; missing {bad}, given {sorted(given)}")
        return [values[f.decision] if f.decision in given else
                torch.zeros(shape, dtype=dtype, device=self.rt.device)
                for f, dtype, shape in zip(self.b.fields, lane.dtypes, lane.shapes)]


def _runtime_width(rt, b: GuardedCollective, stage: int) -> bool:
    """Whether the program of pipeline `stage` sends `b` at a width known only at run time."""
    program = rt.plan.plan.rank_class(stage).program
    return any(op.bytes is None and (op.boundary == b.id or
                                     (op.boundary is ABSENT and (op.site,) == b.sites))
               for kind in ROUNDS for op in program.round(kind))


def accept_sites(sites: dict, round_: str) -> tuple[str, ...]:
    """The accept sites of a round kind, in plan order. Two or more are alternatives (DSpark
    and DFlash under `sampling: mixed`): each round fires exactly one of them."""
    return tuple(n for n, s in sites.items() if s.phase == "accept" and s.round == round_)


def _numel(shape) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def _live(t: torch.Tensor, f, shape: tuple[int, ...]) -> torch.Tensor:
    if t.dtype != DTYPES[f.dtype]:
        raise TypeError(f"{f.site}.{f.decision}: expected dtype {f.dtype}, found {t.dtype}")
    if tuple(t.shape) == shape:
        return t
    if shape and t.dim() == len(shape) and tuple(t.shape[1:]) == shape[1:] and t.shape[0] >= shape[0]:
        return t[: shape[0]]  # capacity rows: the live prefix is the payload
    raise ValueError(f"{f.site}.{f.decision}: expected shape {list(shape)} for these live rows, "
                     f"found {list(t.shape)}")
