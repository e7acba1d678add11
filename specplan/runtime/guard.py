"""The guard header every guarded buffer starts with, and its check on receipt.

Layout (the plan's `layout.header`): int32 boundary id @0, int32 live rows @4, int64 round @8,
int64 plan fingerprint @16, 8 zero bytes. A receiver compares the header it got with the one
it expected; ranks that fall out of order meet a different boundary id or round here, within
the round, instead of a byte-count mismatch that would hang NCCL or crash gloo.

The hot path uses :class:`GuardHeader`: one boundary's expected header, preallocated at bind
(id and fingerprint written once), updated in place per call (live rows, round), written into
the buffer's first 32 bytes by one copy and compared with what arrived by one equality.
"""

from __future__ import annotations

import struct

import numpy as np
import torch

from specplan.runtime.errors import DesyncError
from specplan.runtime.plan_view import HEADER_FIELDS, Boundary, RELAY_ID_BASE

HEADER_BYTES = 32
# What `_FORMAT` writes, as plan.json states a header: Runtime refuses a plan laid out otherwise.
HEADER_SLOTS = (("boundary", "int32", 0), ("live_rows", "int32", 4), ("round", "int64", 8),
                ("fingerprint", "int64", 16))


_FORMAT = "=iiqq8x"  # native byte order, as the buffer's typed views read it


def header_bytes(boundary: int, live_rows: int, round_: int, fingerprint: int, device) -> torch.Tensor:
    """The 32 header bytes as one uint8 tensor on `device`, ready to pack at offset 0."""
    raw = bytearray(struct.pack(_FORMAT, boundary, live_rows, round_, fingerprint))
    return torch.frombuffer(raw, dtype=torch.uint8).to(device)


def read_header(buffer: torch.Tensor) -> tuple[int, int, int, int]:
    return struct.unpack(_FORMAT, buffer[:HEADER_BYTES].cpu().numpy().tobytes())


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


class GuardHeader:
    """One boundary's expected header: 4 int64 words [id | live_rows, round, fingerprint, 0].

    `slot` is the buffer's header as a typed view: a numpy int64[4] sharing the memory of a CPU
    buffer's first 32 bytes, or (CUDA) the torch int64[4] view of them; made once per buffer by
    :func:`header_slot`.
    """

    __slots__ = ("boundary", "words", "halves", "_staging")

    def __init__(self, boundary: int, fingerprint: int):
        self.boundary = boundary
        self.words = np.zeros(4, dtype=np.int64)
        self.halves = self.words[:1].view(np.int32)  # int32 id @0, int32 live rows @4
        self.halves[0] = boundary
        self.words[2] = fingerprint
        self._staging = None

    def set(self, live_rows: int, round_: int) -> None:
        self.halves[1] = live_rows
        self.words[1] = round_

    def write(self, slot) -> None:
        if isinstance(slot, np.ndarray):
            slot[:] = self.words
        else:
            slot.copy_(torch.from_numpy(self.words))

    def matches(self, slot) -> bool:
        got = slot if isinstance(slot, np.ndarray) else slot.cpu().numpy()
        return got.tobytes() == self.words.tobytes()

    def expected(self) -> tuple[int, int, int, int]:
        return struct.unpack(_FORMAT, self.words.tobytes())


def header_slot(buffer: torch.Tensor):
    """The typed view of a buffer's header bytes that GuardHeader writes and checks."""
    view = buffer[:HEADER_BYTES].view(torch.int64)
    return view.numpy() if buffer.device.type == "cpu" else view
