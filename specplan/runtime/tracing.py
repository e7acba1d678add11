"""Per-rank trace of converged logical state: one JSON line per request and decision.

A line holds round, row (its index in the batch), request (the engine's own request id when it
passes one) and generation (the row's generation, batch identity's; 0 when the engine passes
ids alone, null when it passes none), site, decision, a 64-bit hash of the row, its first values, the request's logical seq_len and positions, and
the plan fingerprint (every line, so a file read alone still says which plan wrote it). Never
physical KV slots: those may rightly differ between ranks (logical layout must agree, physical
addresses need not). Acceptance lines (site `acceptance`, decision `accepted_len`) carry the
tokens a request committed in a round (accepted drafts + the bonus) as `accepted`.
`specplan diff` (specplan/trace/diff.py) reads these files without torch.

Writing a trace reads every traced value back to the host: it is a debugging mode, outside
the device path's no-synchronisation guarantee.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from specplan.runtime.batch import Lens, Requests, as_batch
from specplan.runtime.hashing import hash64, preview


class TraceWriter:
    def __init__(self, trace_dir: str, rank: int, replica: int, fingerprint: str) -> None:
        path = Path(trace_dir)
        path.mkdir(parents=True, exist_ok=True)
        self.rank, self.replica, self.fingerprint = rank, replica, fingerprint
        self.file = open(path / f"rank{rank}.jsonl", "w", buffering=1)  # one run per file

    def _write(self, record: dict) -> None:
        record.update(rank=self.rank, replica=self.replica, fingerprint=self.fingerprint)
        self.file.write(json.dumps(record, separators=(",", ":")) + "\n")

    def converge(self, round_: int, site: str, values: dict, requests: Requests,
                 seq_lens: Lens | None) -> None:
        for name, t in values.items():
            if t.dim() == 0:
                self._write({"round": round_, "request": None, "site": site, "decision": name,
                             "hash": hash64(t), "value": preview(t), "seq_len": None, "positions": None})
                continue
            rows = t.reshape(t.shape[0], -1) if t.dim() > 1 else t.reshape(t.shape[0], 1)
            ids = _Rows(requests)
            for i in range(rows.shape[0]):
                seq = int(seq_lens[i]) if seq_lens is not None else None
                self._write({"round": round_, "row": i, **ids.at(i), "site": site,
                             "decision": name, "hash": hash64(rows[i]), "value": preview(rows[i]),
                             "seq_len": seq, "positions": None})

    def commit(self, round_: int, requests: Requests, prefix: torch.Tensor, new_seq: torch.Tensor,
               out_tokens: torch.Tensor, commit_lens: torch.Tensor) -> None:
        """What the round committed per request: its logical positions and tokens."""
        ids = _Rows(requests)
        for i in range(new_seq.shape[0]):
            n = int(commit_lens[i])
            tokens = out_tokens[i, :n]
            self._write({"round": round_, "row": i, **ids.at(i), "site": "commit",
                         "decision": "out_tokens", "hash": hash64(tokens), "value": preview(tokens),
                         "seq_len": int(new_seq[i]), "positions": list(range(int(prefix[i]), int(new_seq[i])))})

    def acceptance(self, round_: int, requests: Requests, accepted_lens: Lens) -> None:
        """Per request, the tokens it committed this round (accepted drafts + the bonus)."""
        lens = accepted_lens.tolist() if isinstance(accepted_lens, torch.Tensor) else list(accepted_lens)
        ids = _Rows(requests)
        for i, n in enumerate(lens):
            n = int(n)
            self._write({"round": round_, "row": i, **ids.at(i), "site": "acceptance",
                         "decision": "accepted_len", "hash": n, "value": [n], "seq_len": None,
                         "positions": None, "accepted": n})

    def close(self) -> None:
        self.file.close()


class _Rows:
    """Per row, the trace's `request` and `generation` (read to the host once per call)."""

    def __init__(self, requests: Requests) -> None:
        batch = as_batch(requests)
        self.pairs = batch.pairs() if batch is not None else None

    def at(self, i: int) -> dict:
        if self.pairs is None or i >= len(self.pairs):
            return {"request": i, "generation": None}
        q, g = self.pairs[i]
        return {"request": q, "generation": g}
