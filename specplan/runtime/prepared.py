"""What one boundary (or relay) of a bound Runtime needs per call, made once at bind."""

from __future__ import annotations

import torch

from specplan.runtime.errors import WireMismatch
from specplan.runtime.guard import HEADER_BYTES, HEADER_SLOTS, DeviceGuard, GuardHeader
from specplan.runtime.kernels import FusedLayout
from specplan.runtime.plan_view import Boundary

DTYPES = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64, "float32": torch.float32}


class Prepared:
    """What one boundary (or relay) needs per call, made once at bind."""

    __slots__ = ("rt", "b", "buf", "slot", "header", "group", "ranks", "source", "decisions",
                 "lanes", "_shapes")

    def __init__(self, rt, b: Boundary):
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
