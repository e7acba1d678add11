"""The guard header every guarded buffer starts with, and its two checks on receipt.

Layout (the plan's `layout.header`), defined here once for the whole runtime: int32 boundary
id @0, int32 live rows @4, int64 round @8, int64 plan fingerprint @16, int64 batch digest @24
(the (request, generation) of every live row, specplan/runtime/batch.py; 0 when batch identity
is off). Code reads the header only through `_FORMAT` and the word indices below. A receiver compares the
header it got with the one it expected; ranks that fall out of order meet a different
boundary id or round here, within the round, instead of a byte-count mismatch that would
hang NCCL or crash gloo.

Two checks share that layout:

- :class:`GuardHeader` (host path, the default on a CPU): the expected header in host memory,
  compared with what arrived by one equality right after the collective; a mismatch raises
  at once.
- :class:`DeviceGuard` (device path, the default on CUDA / NPU): the expected header is a
  device tensor made at bind, the comparison runs on the device and leaves the first mismatch
  of the round in the runtime's :class:`DeviceFlag`; nothing is read back until
  `Runtime.check_round()` (or the probe, or close) reads the flag once. No host
  synchronisation, no host-made tensor, no allocation at bind's size: a converge can be
  captured in a CUDA graph.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple, Union

import numpy as np
import torch

from specplan.ir.nodes import GUARD_HEADER, GUARD_HEADER_BYTES
from specplan.runtime.errors import DesyncError
from specplan.runtime.kernels.guard_check import guard_check, guard_write
from specplan.runtime.plan_view import HEADER_FIELDS, RELAY_ID_BASE, GuardedCollective

# What `_FORMAT` writes, as plan.json states a header (ir/nodes.py, the one layout): Runtime
# refuses a plan laid out otherwise.
HEADER_SLOTS, HEADER_BYTES = GUARD_HEADER, GUARD_HEADER_BYTES
HEADER_WORDS = HEADER_BYTES // 8
# native byte order, as the buffer's typed views read it ("=iiqqq")
_FORMAT = "=" + "".join({"int32": "i", "int64": "q"}[dtype] for _, dtype, _ in HEADER_SLOTS)
ID_HALF, LIVE_HALF = 0, 1  # int32 halves of word 0
ROUND_WORD, FINGERPRINT_WORD, BATCH_WORD = 1, 2, 3


class Header(NamedTuple):
    """A guard header field by field, in the order of ir/nodes.py GUARD_HEADER (checked below)."""

    boundary: int
    live_rows: int
    round: int
    fingerprint: int
    batch: int


assert Header._fields == HEADER_FIELDS, "Header names ir/nodes.py GUARD_HEADER's fields in order"


def expected_words(boundary: int, fingerprint: int) -> np.ndarray:
    """A boundary's header as int64 words, live rows and round still 0."""
    words = np.zeros(HEADER_WORDS, dtype=np.int64)
    words[:1].view(np.int32)[ID_HALF] = boundary
    words[FINGERPRINT_WORD] = fingerprint
    return words


def header_bytes(boundary: int, live_rows: int, round_: int, fingerprint: int, device: torch.device | str,
                 batch: int = 0) -> torch.Tensor:
    """The 32 header bytes as one uint8 tensor on `device`, ready to pack at offset 0."""
    raw = bytearray(struct.pack(_FORMAT, boundary, live_rows, round_, fingerprint, batch))
    return torch.frombuffer(raw, dtype=torch.uint8).to(device)


# A header slot: a numpy view of a CPU buffer on the host path, else the device tensor.
Slot = Union[np.ndarray, torch.Tensor]


def read_header(buffer: torch.Tensor) -> tuple[int, ...]:
    return struct.unpack(_FORMAT, buffer[:HEADER_BYTES].cpu().numpy().tobytes())


def words_header(words: np.ndarray | torch.Tensor | Sequence[int]) -> tuple[int, ...]:
    """The header fields of HEADER_WORDS int64 words (as `read_header` gives them)."""
    return struct.unpack(_FORMAT, np.asarray(words, dtype=np.int64).tobytes())


def batch_only(got: Sequence[int], expected: Sequence[int]) -> bool:
    """Whether the headers differ in the batch word alone (same call, different batch)."""
    return got[BATCH_WORD + 1] != expected[BATCH_WORD + 1] and all(
        a == b for i, (a, b) in enumerate(zip(got, expected)) if i != BATCH_WORD + 1)


def describe(header: Sequence[int], names: dict[int, str]) -> str:
    h = Header(*header)
    what = names.get(h.boundary, "relay" if h.boundary >= RELAY_ID_BASE else "unknown boundary")
    return (f"boundary {h.boundary} ({what}), round {h.round}, live_rows {h.live_rows}, "
            f"fingerprint {h.fingerprint & (2**64 - 1):016x}, "
            f"batch {h.batch & (2**64 - 1):016x}")


def check_header(got: Sequence[int], expected: Sequence[int], b: GuardedCollective, *, rank: int, source: int, names: dict[int, str],
                 when: str = "") -> None:
    if tuple(got) == tuple(expected):
        return
    raise DesyncError(
        f"desync at site {b.label} (boundary {b.id}), round {expected[2]}: rank {rank} expected "
        f"[{describe(expected, names)}] but received from rank {source} "
        f"[{describe(got, names)}]; the ranks of group {b.family} fell out of order or disagree "
        f"on the batch{when}")


class GuardHeader:
    """One boundary's expected header in host memory: 4 int64 words.

    `set_batch` writes the batch digest word (an int; 0 when batch identity is off).

    `slot` is the buffer's header as a typed view: a numpy int64[4] sharing the memory of a CPU
    buffer's first 32 bytes, or (CUDA) the torch int64[4] view of them; made once per buffer by
    :func:`header_slot`.
    """

    __slots__ = ("boundary", "words", "halves")

    def __init__(self, boundary: int, fingerprint: int) -> None:
        self.boundary = boundary
        self.words = expected_words(boundary, fingerprint)
        self.halves = self.words[:1].view(np.int32)

    def set(self, live_rows: int, round_: int) -> None:
        self.halves[LIVE_HALF] = live_rows
        self.words[ROUND_WORD] = round_

    def set_batch(self, word: int) -> None:
        self.words[BATCH_WORD] = word

    def write(self, slot: Slot) -> None:
        if isinstance(slot, np.ndarray):
            slot[:] = self.words
        else:
            slot.copy_(torch.from_numpy(self.words))

    def matches(self, slot: Slot) -> bool:
        got = slot if isinstance(slot, np.ndarray) else slot.cpu().numpy()
        return got.tobytes() == self.words.tobytes()

    def expected(self) -> tuple[int, ...]:
        return words_header(self.words)


def header_slot(buffer: torch.Tensor, *, device_path: bool = False) -> Slot:
    """The typed view of a buffer's header bytes that a guard writes and checks."""
    view = buffer[:HEADER_BYTES].view(torch.int64)
    return view.numpy() if buffer.device.type == "cpu" and not device_path else view


class DeviceFlag:
    """The runtime's device-side record of the first header mismatch since the last read.

    `record` holds int64 [hit, expected header words, received header words, source rank];
    `round_word` is the round every DeviceGuard copies into its expected header, written once
    per round by `set_round` (a fill on the device; an engine replaying a captured converge
    calls `Runtime.set_round` before the replay).
    """

    WORDS = 2 + 2 * HEADER_WORDS

    def __init__(self, device: torch.device) -> None:
        self.round_word = torch.zeros(1, dtype=torch.int64, device=device)
        self.record = torch.zeros(self.WORDS, dtype=torch.int64, device=device)
        self._round: int | None = None

    def set_round(self, round_: int) -> None:
        if round_ != self._round:
            self.round_word.fill_(round_)
            self._round = round_

    def read(self) -> list[int] | None:
        """The one host read: the recorded mismatch (then cleared), or None."""
        hit = self.record.tolist()
        if not hit[0]:
            return None
        self.record.zero_()
        return hit


class DeviceGuard:
    """One boundary's expected header as a device tensor, checked on the device into a flag.

    `row` is this boundary's would-be record [1, expected words, received words, source]; the
    expected header is a view into it. `write` and `matches` are one launch each on CUDA
    (kernels/guard_check.py: the round word copied in, the header written, or compared and the
    row moved into the flag when it differs and the flag is clear), no host read.
    """

    __slots__ = ("boundary", "flag", "row", "words", "halves", "got", "_live", "_batch")

    def __init__(self, boundary: int, fingerprint: int, source: int, flag: DeviceFlag,
                 device: torch.device | str) -> None:
        self.boundary, self.flag = boundary, flag
        row = np.zeros(DeviceFlag.WORDS, dtype=np.int64)
        row[0], row[-1] = 1, source
        row[1: 1 + HEADER_WORDS] = expected_words(boundary, fingerprint)
        self.row = torch.from_numpy(row).to(device)  # made once, at bind
        self.words = self.row[1: 1 + HEADER_WORDS]
        self.got = self.row[1 + HEADER_WORDS: 1 + 2 * HEADER_WORDS]
        self.halves = self.words[:1].view(torch.int32)
        self._live: int | None = None
        self._batch: int | None = 0

    def set(self, live_rows: int, round_: int) -> None:
        self.flag.set_round(round_)  # a device fill once per round; write / matches copy it
        if live_rows != self._live:
            self.halves[LIVE_HALF].fill_(live_rows)
            self._live = live_rows

    def set_batch(self, word: torch.Tensor | int) -> None:
        """The batch digest word: a device int64 [1] tensor (copied on the device, no host
        read) or an int (a fill, skipped when unchanged). It joins the device compare."""
        if isinstance(word, torch.Tensor):
            self.words[BATCH_WORD: BATCH_WORD + 1].copy_(word)
            self._batch = None
        elif word != self._batch:
            self.words[BATCH_WORD].fill_(word)
            self._batch = word

    def write(self, slot: torch.Tensor) -> None:
        guard_write(slot, self.row, self.flag.round_word, round_index=ROUND_WORD, words=HEADER_WORDS)

    def matches(self, slot: torch.Tensor) -> bool:
        """Record a mismatch on the device; always True (the host learns at the flag's read)."""
        guard_check(slot, self.row, self.flag.round_word, self.flag.record, round_index=ROUND_WORD,
                    words=HEADER_WORDS)
        return True
