"""Reading per-rank traces (`runtime.trace_dir`) and finding where ranks first diverge.

Torch-free: `specplan diff` runs on a laptop over traces copied from a cluster. Records are
joined on (replica, round, site, decision, request): ranks of one replica serving one request
must record the same hash, seq_len and positions; ranks of other replicas serve other requests
and are never compared. The first divergence is the earliest round, then the earliest record
in trace order; every request that diverges at that round and site is listed with it.

Before values, batches: records that name their row (`row`, with a `generation`) are joined on
(replica, round, site, decision, row) too, and ranks of one replica whose row holds another
(request, generation) disagree on the batch itself. Such a disagreement, when it comes no later
than the first value divergence, is what diff reports ("rank 3 holds request 17 gen 2 where
rank 0 holds request 17 gen 1"): the values then differ because the rows are other requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

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


def _key(rec: dict) -> Key:
    return (rec.get("replica", 0), rec["round"], rec["site"], rec["decision"], json.dumps(rec["request"]))


def _state(rec: dict) -> tuple:
    return (rec["hash"], rec.get("seq_len"), json.dumps(rec.get("positions")))


@dataclass
class BatchDivergence:
    """Ranks of one replica hold different (request, generation) in one row of one call."""

    round: int
    site: str
    decision: str
    replica: int
    row: int
    by_rank: dict[int, tuple]  # rank -> (request, generation)

    def render(self) -> str:
        ranks = sorted(self.by_rank)
        ref = ranks[0]
        others = [r for r in ranks if self.by_rank[r] != self.by_rank[ref]]
        said = "; ".join(f"rank {r} holds {_pair(self.by_rank[r])} where rank {ref} holds "
                         f"{_pair(self.by_rank[ref])}" for r in others)
        return (f"batch disagreement: round {self.round}, site {self.site}, decision "
                f"{self.decision}, replica {self.replica}, row {self.row}: {said}\n"
                f"  the ranks disagree on which request the row is, so its values are not compared")


def _pair(pair: tuple) -> str:
    return f"request {json.loads(pair[0])} gen {pair[1]}"


def first_batch_divergence(traces: dict[int, list[dict]]) -> BatchDivergence | None:
    table: dict[tuple, dict[int, tuple]] = {}
    order: dict[tuple, int] = {}
    for rank, records in sorted(traces.items()):
        for i, rec in enumerate(records):
            if rec.get("row") is None or rec.get("generation") is None:
                continue
            k = (rec.get("replica", 0), rec["round"], rec["site"], rec["decision"], rec["row"])
            table.setdefault(k, {}).setdefault(rank, (json.dumps(rec["request"]), rec["generation"]))
            order[k] = min(order.get(k, i), i)
    bad = [k for k, ranks in table.items() if len(set(ranks.values())) > 1]
    if not bad:
        return None
    first = min(bad, key=lambda k: (k[1], order[k]))
    return BatchDivergence(first[1], first[2], first[3], first[0], first[4], table[first])


def first_divergence(traces: dict[int, list[dict]]) -> Divergence | BatchDivergence | None:
    """The first batch disagreement when it comes no later than the first value divergence,
    else the first value divergence, else None."""
    values = first_value_divergence(traces)
    batch = first_batch_divergence(traces)
    if batch is not None and (values is None or batch.round <= values.round):
        return batch
    return values


def first_value_divergence(traces: dict[int, list[dict]]) -> Divergence | None:
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


# -- one plan per comparison; acceptance between two runs ---------------------------------------

def plans(paths: list[str]) -> dict[str, list[str]]:
    """Plan fingerprint -> the trace files stamped with it (from each file's first record;
    files of traces older than the stamp are left out). Every line is checked first
    (TraceError, exit 2)."""
    from specplan.trace.read import read_run

    traces, origin = read_run(paths)
    out: dict[str, list[str]] = {}
    for rank, records in traces.items():
        fingerprint = records[0].get("fingerprint") if records else None
        if fingerprint:
            out.setdefault(fingerprint, []).append(str(origin[rank]))
    return out


def mixed_plans(paths: list[str]) -> str | None:
    """A `file: message` line when the traces were written under different plans, else None."""
    found = plans(paths)
    if len(found) < 2:
        return None
    (fa, files_a), (fb, files_b) = list(found.items())[:2]
    return (f"{files_b[0]}: written under plan fingerprint {fb}, but {files_a[0]} under plan "
            f"fingerprint {fa}; diff compares the ranks of one run of one plan (compare two runs "
            f"of different plans with --acceptance)")


@dataclass
class Acceptance:
    """One run's accepted lengths: tokens committed per request per round (drafts + bonus)."""

    run: str
    mean: float
    samples: int  # (request, round) pairs
    rounds: int
    fingerprint: str | None

    def render(self, label: str) -> str:
        plan = f", plan {self.fingerprint[:16]}" if self.fingerprint else ""
        return (f"{label} {self.run}: mean accepted length {self.mean:.4f} per request per round "
                f"({self.samples} request-rounds, {self.rounds} rounds{plan})")


def acceptance(run: str) -> Acceptance | None:
    """The mean over every (replica, request, round) a run's traces record an accepted length
    for; a replica's ranks record the same requests, so each is counted once."""
    from specplan.trace.read import read_run

    seen: dict[tuple, int] = {}
    for records in read_run([run])[0].values():
        for rec in records:
            if rec.get("decision") != "accepted_len" or "accepted" not in rec:
                continue
            key = (rec.get("replica", 0), rec["round"], json.dumps(rec["request"]))
            seen.setdefault(key, rec["accepted"])  # an integer >= 0: checked by read_run
    if not seen:
        return None
    prints = list(plans([run]))
    return Acceptance(run, sum(seen.values()) / len(seen), len(seen), len({k[1] for k in seen}),
                      prints[0] if len(prints) == 1 else None)


def shortfall(a: Acceptance, b: Acceptance) -> float:
    """How far B's mean falls short of A's, as a fraction of A's (negative: B is higher)."""
    return (a.mean - b.mean) / a.mean if a.mean else 0.0
