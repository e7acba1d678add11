"""A bound Runtime's batch identity: the header's batch word per call, and on a mismatch the
rows that name it.

Per guarded call the runtime stamps the expected header's `batch` word with the digest of the
rows the engine handed over (specplan/runtime/batch.py) and notes the batch in a small ledger
keyed by (header id, round): one dict store. Nothing else moves while ranks agree.

When a receiver's digest differs from the source's (the only header word that differs), it
needs the source's rows to name the first differing row. Only then are they exchanged, over
the process group's store (no collective, so no rank has to know in advance): the receiver
posts an ask under the source's name; a daemon thread on every rank, which polls the store a
few times a second and does nothing else, answers from its ledger. The receiver waits for the
answer at most a few seconds, then raises `BatchMismatch` with both (request, generation) pairs.
"""

from __future__ import annotations

import atexit
import datetime
import json
import threading
import weakref
from collections import OrderedDict

import torch.distributed as dist

from specplan.runtime.batch import (as_batch, describe_row, digest_device, digest_host,
                                    first_difference, on_device)
from specplan.runtime.errors import BatchMismatch
from specplan.runtime.plan_view import RELAY_ID_BASE

KEEP = 512  # (header id, round) entries a rank keeps to answer an ask
POLL_S = 0.1
ASK_TIMEOUT_S = 10.0


class Identity:
    def __init__(self, rt, enabled: bool):
        self.rt, self.enabled = rt, enabled
        self.ledger: OrderedDict = OrderedDict()
        self._store = _store() if enabled else None
        self._stop = threading.Event()
        self._thread = None
        self._asked: list[tuple[int, int, int]] = []  # (asker, header id, round) answered
        if self._store is not None:
            self._thread = threading.Thread(target=self._answer, name="specplan-batch-identity",
                                            daemon=True)
            self._thread.start()
            # Stop the thread before interpreter shutdown: a daemon thread killed inside a store
            # call unwinds through C++ frames and aborts the process (SIGABRT at exit).
            atexit.register(_close_at_exit, weakref.ref(self))

    # -- the hot path ----------------------------------------------------------------------
    def stamp(self, p, requests, round_: int, live_rows: int) -> None:
        """Put this call's batch digest into the expected header (0 when off or not given)."""
        if not self.enabled:
            return
        batch = as_batch(requests)
        if batch is None:
            p.header.set_batch(0)
        elif self.rt.device_flag is not None and on_device(batch, self.rt.device):
            p.header.set_batch(digest_device(batch, live_rows, self.rt.device))
        else:
            p.header.set_batch(digest_host(batch, live_rows))
        ledger = self.ledger
        ledger[(p.b.id, round_)] = (batch, live_rows)
        if len(ledger) > KEEP:
            ledger.popitem(last=False)

    # -- a mismatch --------------------------------------------------------------------------
    def held(self, bid: int, round_: int):
        """This rank's (request, generation) pairs for a call, or None (no batch given)."""
        entry = self.ledger.get((bid, round_))
        if entry is None or entry[0] is None:
            return None
        batch, live = entry
        return [list(pair) for pair in batch.pairs(live)]

    def mismatch(self, b, round_: int, source: int, expected: int, got: int, when: str = ""):
        """Raise BatchMismatch for boundary or relay `b`, naming the first differing row."""
        rt = self.rt
        mine = self.held(b.id, round_)
        theirs, why = self._ask(source, b.id, round_)
        what = "relay" if b.id >= RELAY_ID_BASE else "boundary"
        head = f"batch mismatch at site {b.label} ({what} {b.id}), round {round_}: "
        if mine is None or theirs is None:
            none = rt.rank if mine is None else source
            rows = (f"rank {none} gave no requests for this call" if why is None else
                    f"rank {rt.rank} could not fetch rank {source}'s rows ({why})")
        else:
            i = first_difference(mine, theirs)
            mine_i = mine[i] if i is not None and i < len(mine) else None
            theirs_i = theirs[i] if i is not None and i < len(theirs) else None
            rows = (f"row {i}: rank {rt.rank} holds {describe_row(mine_i)} where rank {source} "
                    f"(the source) holds {describe_row(theirs_i)}" if i is not None else
                    "the rows agree (a digest collision?)")
        raise BatchMismatch(
            f"{head}{rows}; the ranks of group {b.family} disagree on which requests the rows "
            f"are (batch digest {expected & 0xFFFFFFFFFFFFFFFF:016x} here, "
            f"{got & 0xFFFFFFFFFFFFFFFF:016x} from rank {source}){when}")

    def _ask(self, source: int, bid: int, round_: int):
        if self._store is None:
            return None, "no process-group store"
        store = self._store
        try:
            n = store.add(f"asks/{source}", 1)
            store.set(f"ask/{source}/{n}", json.dumps([bid, round_, self.rt.rank]))
            key = f"answer/{source}/{bid}/{round_}"
            store.wait([key], datetime.timedelta(seconds=min(ASK_TIMEOUT_S, self.rt.plan.timeout_s)))
            return json.loads(store.get(key)), None
        except (RuntimeError, dist.DistError) as exc:
            return None, f"no answer: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"

    def _answer(self) -> None:
        """The daemon: answer peers' asks for this rank's rows, in the order they were posted."""
        store, me, n = self._store, self.rt.rank, 1
        assert store is not None  # the daemon starts only with a store
        while not self._stop.wait(POLL_S):
            try:
                while store.check([f"ask/{me}/{n}"]):
                    bid, round_, asker = json.loads(store.get(f"ask/{me}/{n}"))
                    rows = self.held(bid, round_)
                    self._asked.append((asker, bid, round_))  # before the asker can leave
                    store.set(f"answer/{me}/{bid}/{round_}", json.dumps(rows))
                    n += 1
            except Exception:  # noqa: BLE001 (the store went away at shutdown: stop answering)
                return

    def reported(self) -> str:
        """For this rank's own error after a peer left: the batch mismatches peers found in
        what it sent ('' when none)."""
        if not self._asked:
            return ""
        names = self.rt.names
        found = ", ".join(f"rank {a} at {names.get(bid, bid)} round {r}" for a, bid, r in self._asked[:4])
        return f"; peers found a batch mismatch in what this rank sent ({found}): see their BatchMismatch"

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * POLL_S + 1)


def _close_at_exit(ref) -> None:
    identity = ref()
    if identity is not None:
        identity.close()


def _store():
    """The default process group's store, under a prefix of its own; None when unavailable."""
    try:
        base = dist.distributed_c10d._get_default_store()
    except (RuntimeError, ValueError, AttributeError):
        return None
    return dist.PrefixStore("specplan/batch/", base)
