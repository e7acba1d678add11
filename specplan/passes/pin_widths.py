"""Pass pin_widths: every payload gets one width and byte count, fixed at compile time.

Requires: fuse_converges. Ensures: each boundary has a packed layout: a 32-byte guard header
(boundary id, live rows, round, plan fingerprint, batch digest: the rows' (request,
generation), specplan/runtime/batch.py), then each decision's field at an 8-byte
aligned offset, sized for `runtime.max_batch` rows; and the draft's `buffer_bytes` gives,
per family, the one buffer size all of that family's guarded collectives use (its largest),
so ranks that fall out of order meet a header mismatch instead of a size mismatch. The
relays pipeline_stages adds are laid out by the same `pack` and share buffers the same way.
"""

from __future__ import annotations

from collections.abc import Iterable

from specplan.errors import PlanError
from specplan.ir.codec import given
from specplan.ir.draft import ABSENT, BoundaryDraft, RelayDraft
from specplan.ir.nodes import GUARD_HEADER, GUARD_HEADER_BYTES
from specplan.ir.records import Field, Layout
from specplan.methods.base import eval_dim, nbytes
from specplan.passes.context import Planning
from specplan.passes.contracts import DRAFT

NAME = "pin_widths"
REQUIRES = (DRAFT.boundaries.each.sites,)
ENSURES = (DRAFT.boundaries.each.layout, DRAFT.boundaries.each.buffer_bytes, DRAFT.buffer_bytes)
HEADER, HEADER_BYTES = GUARD_HEADER, GUARD_HEADER_BYTES  # ir/nodes.py: the one layout
ALIGN = 8


def run(p: Planning) -> None:
    for b in given(p.draft.boundaries):
        b.layout = pack(p, b.sites, guarded=b.op == "broadcast")
    share_buffers(p, given(p.draft.boundaries))


def share_buffers(p: Planning, collectives: list[BoundaryDraft] | list[RelayDraft]) -> None:
    """One buffer per family: every guarded collective of a family sends the largest layout.

    A MIN reduction carries no header and never meets a broadcast of its family in one
    buffer, so it keeps its own size rather than the broadcasts' largest.
    """
    if p.draft.buffer_bytes is ABSENT:
        p.draft.buffer_bytes = {}
    sizes = p.draft.buffer_bytes
    guarded = [c for c in collectives if given(c.layout).header_bytes]
    for c in guarded:
        sizes[c.family] = max(sizes.get(c.family, 0), given(c.layout).bytes)
    for c in collectives:
        layout = given(c.layout)
        c.buffer_bytes = sizes[c.family] if layout.header_bytes else layout.bytes
    for b in given(p.draft.boundaries):  # a family that gained relays grows its boundaries too
        if given(b.layout).header_bytes and b.family in sizes:
            b.buffer_bytes = sizes[b.family]


def field_shape(p: Planning, shape: tuple[str, ...]) -> list[int]:
    """A decision's shape at capacity (bs = runtime.max_batch); errors name the bad symbol."""
    dims = [eval_dim(dim, p.symbols) for dim in shape]
    if any(d < 0 for d in dims):
        raise PlanError.single(p.spec, ("speculative",), f"shape {shape} evaluates to {dims}: "
                               f"a negative width for these speculative settings")
    return dims


def pack(p: Planning, sites: Iterable[str], *, guarded: bool) -> Layout:
    """The packed layout of `sites`' decisions: the guard header if `guarded`, then fields."""
    header = guarded
    offset = HEADER_BYTES if header else 0
    fields = []
    for site in sites:
        for name in given(p.draft.sites)[site].decisions:
            d = p.method.decision(name)
            dims = field_shape(p, d.shape)
            size = nbytes(dims, d.dtype)
            fields.append(Field(site=site, decision=name, dtype=d.dtype, shape=tuple(dims),
                                     symbols=tuple(d.shape), offset=offset, bytes=size))
            offset += -(-size // ALIGN) * ALIGN
    return Layout(header=HEADER if header else (), header_bytes=HEADER_BYTES if header else 0,
                       capacity_rows=p.spec.runtime.max_batch, fields=tuple(fields), bytes=offset)
