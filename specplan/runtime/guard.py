"""The guard header every guarded buffer starts with, and its check on receipt.

Layout (the plan's `layout.header`): int32 boundary id @0, int32 live rows @4, int64 round @8,
int64 plan fingerprint @16, 8 zero bytes. A receiver compares the header it got with the one
it expected; ranks that fall out of order meet a different boundary id or round here, within
the round, instead of a byte-count mismatch that would hang NCCL or crash gloo.
"""

from __future__ import annotations

import torch

from specplan.runtime.errors import DesyncError
from specplan.runtime.plan_view import HEADER_FIELDS, Boundary, RELAY_ID_BASE

HEADER_BYTES = 32


def header_tensors(boundary: int, live_rows: int, round_: int, fingerprint: int, device):
    """The two typed pieces of a header and their byte offsets, ready for pack_fused."""
    ints = torch.tensor([boundary, live_rows], dtype=torch.int32, device=device)
    longs = torch.tensor([round_, fingerprint, 0], dtype=torch.int64, device=device)
    return [ints, longs], [0, 8]


def read_header(buffer: torch.Tensor) -> tuple[int, int, int, int]:
    ints = buffer[0:8].view(torch.int32).tolist()
    longs = buffer[8:24].view(torch.int64).tolist()
    return ints[0], ints[1], longs[0], longs[1]


def describe(header: tuple[int, int, int, int], names: dict[int, str]) -> str:
    parts = dict(zip(HEADER_FIELDS, header))
    bid = parts["boundary"]
    what = names.get(bid, "relay" if bid >= RELAY_ID_BASE else "unknown boundary")
    return (f"boundary {bid} ({what}), round {parts['round']}, live_rows {parts['live_rows']}, "
            f"fingerprint {parts['fingerprint'] & (2**64 - 1):016x}")


def check_header(got, expected, b: Boundary, *, rank: int, source: int, names: dict[int, str]) -> None:
    if tuple(got) == tuple(expected):
        return
    raise DesyncError(
        f"desync at site {b.label} (boundary {b.id}), round {expected[2]}: rank {rank} expected "
        f"[{describe(expected, names)}] but received from rank {source} "
        f"[{describe(got, names)}]; the ranks of group {b.family} fell out of order or disagree "
        f"on the batch")
