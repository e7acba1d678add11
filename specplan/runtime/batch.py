"""Batch identity: which (request, generation) each live row of a converge or relay belongs to.

Ranks that agree on byte counts and values can still disagree on *which request a row is*: a
state row freed by a finished request and handed to a new one (SGLang's req_pool_idx, vLLM's
state index) while a pipeline entry for the old one is in flight. The engine hands the runtime
its rows' identities (`requests=` of converge / relay / accept); the runtime puts a 64-bit
digest of them in the guard header's `batch` word, and a receiver whose own digest differs
raises `BatchMismatch` before any value is used.

The digest (:func:`digest`): per row i (0-based) of n live rows, with request q and generation
g as 64-bit words and arithmetic modulo 2**64,

    x_i = q * K1 + g * K2 + (i + 1) * K4,   h_i = (x_i ^ (x_i >> 29)) * K3,
    digest = mix(sum_i h_i + n * K1)

where `mix` is splitmix64's finalizer. x -> h is a bijection, so a change in any one row always
moves the digest; the row index enters every term, so an order change moves it too; the sum is
exact modulo 2**64, so any reduction order gives the same word on every rank and device. Two
implementations, equal bit for bit (tests hold them together): numpy on the host (lists, CPU
tensors) and torch on a device tensor (a few element-wise launches, no host read, capturable).
A request id that is not an integer (a string) is hashed to one first (blake2b, 8 bytes), on
the host.

Off (`runtime.batch_identity: false`, or no `requests`), the word is 0 on every rank.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Union

import numpy as np
import torch

_MASK = (1 << 64) - 1


def _signed(v: int) -> int:
    v &= _MASK
    return v - (1 << 64) if v >= 1 << 63 else v


# What an engine hands as a round's rows (`as_batch` reads each): ids, (ids, generations), a Batch.
Ids = Union[torch.Tensor, np.ndarray, Sequence[object]]
Requests = Union["Batch", tuple[Ids, Ids], Ids, None]
Lens = Union[torch.Tensor, Sequence[int]]  # one length per row

K1, K2, K3, K4 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB, 0xD6E8FEB86659FD93
_SK = tuple(_signed(k) for k in (K1, K2, K3, K4))  # as torch's int64 scalars


class Batch:
    """The identities of a round's live rows, in row order: request ids and their generations.

    `requests`, `generations`: int tensors (any device, int32 / int64) or sequences of ints
    (request ids may also be strings); `generations` None means generation 0 for every row
    (an engine that never reuses a state row). Rows past `live_rows` are ignored.
    """

    __slots__ = ("requests", "generations")

    def __init__(self, requests, generations=None):
        self.requests, self.generations = requests, generations

    def pairs(self, live_rows: int | None = None) -> list[tuple]:
        """[(request, generation)] of the live rows (a host read when they are device tensors)."""
        reqs = _host_list(self.requests)
        n = len(reqs) if live_rows is None else min(live_rows, len(reqs))
        gens = [0] * n if self.generations is None else _host_list(self.generations)
        return [(reqs[i], int(gens[i]) if i < len(gens) else None) for i in range(n)]

    def __repr__(self) -> str:
        return f"Batch({self.pairs()})"


def as_batch(requests: Requests) -> Batch | None:
    """`requests` as a Batch: a Batch, a pair (ids, generations) of sequences or tensors, ids
    alone (generation 0), or None (no identity)."""
    if requests is None or isinstance(requests, Batch):
        return requests
    if (isinstance(requests, tuple) and len(requests) == 2
            and all(isinstance(x, (list, tuple, torch.Tensor, np.ndarray)) for x in requests)
            and not (isinstance(requests[0], torch.Tensor) and requests[0].dim() == 0)):
        return Batch(*requests)
    return Batch(requests)


def _host_list(x) -> list:
    if isinstance(x, torch.Tensor):
        return x.reshape(-1).tolist()
    if isinstance(x, np.ndarray):
        return x.reshape(-1).tolist()
    return [r.item() if isinstance(r, torch.Tensor) else r for r in x]


def request_word(q: object) -> int:
    """A request id as a 64-bit word: an int as itself, anything else hashed (blake2b)."""
    if isinstance(q, (int, np.integer)) and not isinstance(q, bool):
        return int(q) & _MASK
    digest = hashlib.blake2b(str(q).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


# -- host (numpy, uint64 wraps) ---------------------------------------------------------------
_U1, _U2, _U3, _S29 = np.uint64(K1), np.uint64(K2), np.uint64(K3), np.uint64(29)


def _words_np(x, n: int) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.dim() == 1 and x.dtype is torch.int64 and x.device.type == "cpu":
            return x[:n].numpy().view(np.uint64)
        return x.reshape(-1)[:n].to("cpu", torch.int64).numpy().view(np.uint64)
    if isinstance(x, np.ndarray):
        return x.reshape(-1)[:n].astype(np.int64).view(np.uint64)
    head = x[:n]
    if all(type(r) is int for r in head):  # the common case: plain ints, one conversion
        return np.array(head, dtype=np.int64).view(np.uint64)
    return np.array([request_word(r.item() if isinstance(r, torch.Tensor) else r) for r in x[:n]],
                    dtype=np.uint64)


def digest_host(batch: Batch, live_rows: int) -> int:
    """The digest as a signed int64 (the header word), computed on the host."""
    n = live_rows
    q = _words_np(batch.requests, n)
    g = None if batch.generations is None else _words_np(batch.generations, n)
    if len(q) != n or (g is not None and len(g) != n):
        raise ValueError(f"requests: {len(q)} request ids and {n if g is None else len(g)} "
                         f"generations for {n} live rows; pass one of each per live row")
    x = q * _U1  # uint64 arrays wrap silently
    if g is not None:
        x += g * _U2
    x += _row_terms(n)
    x ^= x >> _S29
    x *= _U3
    return _signed(_mix_int(int(x.sum(dtype=np.uint64)) + n * K1))


_ROW_TERMS: dict[int, np.ndarray] = {}


def _row_terms(n: int) -> np.ndarray:
    """(i + 1) * K4 for rows 0 .. n-1 (made once per row count)."""
    terms = _ROW_TERMS.get(n)
    if terms is None:
        with np.errstate(over="ignore"):
            terms = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(K4)
        _ROW_TERMS[n] = terms
    return terms


def _mix_int(x: int) -> int:
    x &= _MASK
    x ^= x >> 30
    x = (x * K2) & _MASK
    x ^= x >> 27
    x = (x * K3) & _MASK
    return x ^ (x >> 31)


# -- device (torch int64 wraps; logical shifts by masking) ---------------------------------------
def _srl(x: torch.Tensor, s: int) -> torch.Tensor:
    return (x >> s) & ((1 << (64 - s)) - 1)


def _mix_t(x: torch.Tensor) -> torch.Tensor:
    x = x ^ _srl(x, 30)
    x = x * _SK[1]
    x = x ^ _srl(x, 27)
    x = x * _SK[2]
    return x ^ _srl(x, 31)


def digest_device(batch: Batch, live_rows: int, device: torch.device | str) -> torch.Tensor:
    """The digest as an int64 [1] tensor on `device`, no host read (tensor ids on `device`)."""
    n = live_rows
    q = batch.requests.reshape(-1)[:n].to(device, torch.int64)
    g = (torch.zeros(n, dtype=torch.int64, device=device) if batch.generations is None
         else batch.generations.reshape(-1)[:n].to(device, torch.int64))
    idx = torch.arange(1, n + 1, dtype=torch.int64, device=device)
    x = q * _SK[0] + g * _SK[1] + idx * _SK[3]
    h = (x ^ _srl(x, 29)) * _SK[2]
    return _mix_t(h.sum(0, keepdim=True) + _signed(n * K1))


def on_device(batch: Batch, device: torch.device) -> bool:
    """Whether the digest is best made on `device` (the ids are tensors there already)."""
    return (isinstance(batch.requests, torch.Tensor)
            and batch.requests.device == device
            and (batch.generations is None or isinstance(batch.generations, torch.Tensor)))


def digest(batch: Batch, live_rows: int) -> int:
    """The digest as an int (host). See the module docstring for the formula."""
    return digest_host(batch, live_rows)


# -- what a rank held, for naming rows on a mismatch --------------------------------------------
class BatchHistory:
    """The batches of the last `depth` rounds, by round: what a pipeline stage holds for a relay
    that arrives k rounds after it was sent (`relay(..., round=r, requests=h.at(r))`)."""

    def __init__(self, depth: int = 8) -> None:
        self.depth = depth
        self._by_round: OrderedDict[int, Requests] = OrderedDict()

    def record(self, round_: int, batch: Requests) -> None:
        self._by_round[round_] = batch
        self._by_round.move_to_end(round_)
        while len(self._by_round) > self.depth:
            self._by_round.popitem(last=False)

    def at(self, round_: int) -> Requests:
        try:
            return self._by_round[round_]
        except KeyError:
            raise KeyError(f"no batch recorded for round {round_} (kept: rounds "
                           f"{list(self._by_round)}); record each round's batch before its relay "
                           f"is consumed") from None


def first_difference(mine: list[tuple], theirs: list[tuple]) -> int | None:
    """The first row whose (request, generation) differs, or None."""
    for i in range(max(len(mine), len(theirs))):
        a = mine[i] if i < len(mine) else None
        b = theirs[i] if i < len(theirs) else None
        if a != b:
            return i
    return None


def describe_row(pair: tuple | None) -> str:
    if pair is None:
        return "no row"
    q, g = pair
    if isinstance(q, int) and q < 0:  # a padding id: the engine leaves the row out of the call
        return f"no request (id {q}: the row is left out)"
    return f"request {q} gen {g}"
