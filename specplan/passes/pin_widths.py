"""Pass pin_widths: every payload gets one width and byte count, fixed at compile time.

Requires: fuse_converges. Ensures: each boundary has a packed layout: a 32-byte guard header
(boundary id, live rows, round, plan fingerprint), then each decision's field at an 8-byte
aligned offset, sized for `runtime.max_batch` rows; and `sections["buffer_bytes"]` gives,
per family, the one buffer size all of that family's broadcasts use (its largest), so ranks
that fall out of order meet a header mismatch instead of a size mismatch.
"""

from __future__ import annotations

from specplan.errors import PlanError
from specplan.methods.base import DTYPE_BYTES, eval_dim
from specplan.passes.context import Planning

NAME = "pin_widths"
HEADER_BYTES = 32
HEADER = (("boundary", "int32", 0), ("live_rows", "int32", 4), ("round", "int64", 8),
          ("fingerprint", "int64", 16))
ALIGN = 8


def run(p: Planning) -> None:
    sizes: dict[str, int] = {}
    for b in p.graph.sections["boundaries"]:
        b["layout"] = _layout(p, b)
        if b["op"] == "broadcast":
            sizes[b["family"]] = max(sizes.get(b["family"], 0), b["layout"]["bytes"])
    for b in p.graph.sections["boundaries"]:
        # A MIN reduction carries no header and never meets a broadcast of its family in
        # one buffer, so it keeps its own size rather than the broadcasts' largest.
        b["buffer_bytes"] = sizes[b["family"]] if b["op"] == "broadcast" else b["layout"]["bytes"]
    p.graph.sections["buffer_bytes"] = sizes


def field_shape(p: Planning, shape: tuple[str, ...]) -> list[int]:
    """A decision's shape at capacity (bs = runtime.max_batch); errors name the bad symbol."""
    dims = [eval_dim(dim, p.symbols) for dim in shape]
    if any(d < 0 for d in dims):
        raise PlanError.single(p.spec, ("speculative",), f"shape {shape} evaluates to {dims}: "
                               f"a negative width for these speculative settings")
    return dims


def _layout(p: Planning, boundary: dict) -> dict:
    header = boundary["op"] == "broadcast"
    offset = HEADER_BYTES if header else 0
    fields = []
    for site in boundary["sites"]:
        for name in p.graph.sections["sites"][site]["decisions"]:
            d = p.method.decision(name)
            dims = field_shape(p, d.shape)
            n = 1
            for x in dims:
                n *= x
            nbytes = n * DTYPE_BYTES[d.dtype]
            fields.append({"site": site, "decision": name, "dtype": d.dtype, "shape": dims,
                           "symbols": list(d.shape), "offset": offset, "bytes": nbytes})
            offset += -(-nbytes // ALIGN) * ALIGN
    return {"header": [list(h) for h in HEADER] if header else [], "header_bytes": HEADER_BYTES if header else 0,
            "capacity_rows": p.spec.runtime.max_batch, "fields": fields, "bytes": offset}
