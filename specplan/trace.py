"""Reading per-rank traces (`runtime.trace_dir`) and finding where ranks first diverge.

Torch-free: `specplan diff` runs on a laptop over traces copied from a cluster. Records are
joined on (replica, round, site, decision, request): ranks of one replica serving one request
must record the same hash, seq_len and positions; ranks of other replicas serve other requests
and are never compared. The first divergence is the earliest round, then the earliest record
in trace order; every request that diverges at that round and site is listed with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

Key = tuple  # (replica, round, site, decision, request)


@dataclass
class Divergence:
    round: int
    site: str
    decision: str
    replica: int
    requests: list
    by_rank: dict[int, dict]  # rank -> the record it wrote for the first request

    def render(self) -> str:
        lines = [f"first divergence: round {self.round}, site {self.site}, decision {self.decision}, "
                 f"replica {self.replica}, requests {self.requests}"]
        groups: dict[tuple, list[int]] = {}
        for rank, rec in sorted(self.by_rank.items()):
            groups.setdefault(_state(rec), []).append(rank)
        for state, ranks in groups.items():
            rec = self.by_rank[ranks[0]]
            lines.append(f"  ranks {ranks}: request {rec['request']!r} hash {rec['hash'] & (2**64 - 1):016x} "
                         f"value {rec.get('value')} seq_len {rec.get('seq_len')} positions {rec.get('positions')}")
        return "\n".join(lines)


def trace_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        out.extend(sorted(p.glob("rank*.jsonl")) if p.is_dir() else [p])
    return out


def read(paths: list[str]) -> dict[int, list[dict]]:
    """rank -> its records, in the order it wrote them."""
    traces: dict[int, list[dict]] = {}
    for f in trace_files(paths):
        for line in f.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                traces.setdefault(rec["rank"], []).append(rec)
    return traces


def _key(rec: dict) -> Key:
    return (rec.get("replica", 0), rec["round"], rec["site"], rec["decision"], json.dumps(rec["request"]))


def _state(rec: dict) -> tuple:
    return (rec["hash"], rec.get("seq_len"), json.dumps(rec.get("positions")))


def first_divergence(traces: dict[int, list[dict]]) -> Divergence | None:
    table: dict[Key, dict[int, dict]] = {}
    order: dict[Key, int] = {}
    for rank, records in sorted(traces.items()):
        for i, rec in enumerate(records):
            k = _key(rec)
            table.setdefault(k, {}).setdefault(rank, rec)  # a rank's first record for the key
            order[k] = min(order.get(k, i), i)
    bad = [k for k, ranks in table.items() if len({_state(r) for r in ranks.values()}) > 1]
    if not bad:
        return None
    first = min(bad, key=lambda k: (k[1], order[k]))
    same = [k for k in bad if k[:4] == first[:4]]
    requests = [json.loads(k[4]) for k in sorted(same, key=lambda k: order[k])]
    return Divergence(first[1], first[2], first[3], first[0], requests, table[first])
