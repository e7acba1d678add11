"""`specplan diff`'s input: per-rank trace files read and checked line by line.

The trace contract (DESIGN.md §8): `<trace_dir>/rank<R>.jsonl`, the rank is the file's (a
`rank` key, when present, must agree), one JSON object per line with round, request, site,
decision and a 64-bit integer hash, all stamped with one plan fingerprint. Anything else is a
user error naming file:line (exit 2): a file diff cannot read, a line that is not such an
object, nothing to compare (no records, or one rank only), or traces of two plans. Torch-free.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from specplan.errors import Diagnostic, UserError
from specplan.io.files import not_readable, read_bounded

RANK_FILE = re.compile(r"^rank(0|[1-9][0-9]*)\.jsonl$")
REQUIRED = {"round": int, "site": str, "decision": str, "hash": int}
OPTIONAL = {"replica": int, "seq_len": (int, type(None)), "positions": (list, type(None)),
            "rank": int, "fingerprint": str, "row": int, "generation": (int, type(None)),
            "accepted": int}
MAX_TRACE_BYTES = 1 << 30  # one rank's trace file: 1 GiB


class TraceError(UserError):
    """Traces `specplan diff` cannot compare."""


def _fail(file, message: str, line: int | None = None, col: int | None = None) -> TraceError:
    return TraceError([Diagnostic(str(file), line, col if line else None, "", message)])


def trace_files(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if RANK_FILE.match(f.name))
            if not found:
                raise _fail(p, "holds no rank<R>.jsonl trace: nothing to compare")
            out.extend(found)
        elif not RANK_FILE.match(p.name):
            raise _fail(p, "expected a trace named rank<R>.jsonl (the rank is the file's)")
        else:
            out.append(p)
    return out


def read_run(paths: list[str]) -> tuple[dict[int, list[dict]], dict[int, Path]]:
    """(rank -> its records in file order, rank -> its file), every line checked; raises
    TraceError. No claim on what the records compare to (see load_traces)."""
    traces: dict[int, list[dict]] = {}
    origin: dict[int, Path] = {}
    for f in trace_files(paths):
        named = RANK_FILE.match(f.name)
        assert named is not None  # trace_files keeps only rank<N> files
        rank = int(named.group(1))
        if rank in origin and origin[rank].resolve() != f.resolve():
            raise _fail(f, f"rank {rank} again: {origin[rank]} holds its trace too")
        origin[rank] = f
        traces[rank] = [dict(rec, rank=rank) for rec in _records(f, rank)]
    return traces, origin


def load_traces(paths: list[str]) -> dict[int, list[dict]]:
    """rank -> its records in file order, every line checked, at least two ranks with records
    of one plan; raises TraceError."""
    traces, origin = read_run(paths)
    records = sum(len(r) for r in traces.values())
    if not records:
        raise _fail(", ".join(map(str, origin.values())) or paths[0], "the traces hold no record: nothing to compare")
    if len([r for r in traces.values() if r]) < 2:
        only = next(r for r, recs in traces.items() if recs)
        raise _fail(origin[only], f"only rank {only} has records: nothing to compare (give the "
                                  "traces of every rank, e.g. the whole trace_dir)")
    _one_plan(traces, origin)
    return traces


def _records(f: Path, rank: int) -> list[dict]:
    why = not_readable(f, MAX_TRACE_BYTES)
    if why is not None:
        raise _fail(f, f"{why}; expected a trace of JSON lines")
    try:
        raw = read_bounded(f, MAX_TRACE_BYTES)
    except OSError as exc:
        raise _fail(f, f"cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise _fail(f, str(exc)) from None
    if b"\x00" in raw:
        raise _fail(f, "is a binary file; expected JSON lines")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = raw[: exc.start].count(b"\n") + 1
        raise _fail(f, "is not UTF-8 text; expected JSON lines", at, 1) from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append(_record(f, n, line, rank))
    return out


def _record(f: Path, n: int, line: str, rank: int) -> dict:
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        col = getattr(exc, "colno", 1)
        raise _fail(f, f"malformed JSON: {getattr(exc, 'msg', 'nested too deep')}", n, col) from None
    if not isinstance(rec, dict):
        raise _fail(f, f"expected a JSON object per line, found {type(rec).__name__}", n, 1)
    missing = [k for k in (*REQUIRED, "request") if k not in rec]
    if missing:
        raise _fail(f, f"missing key(s) {', '.join(map(repr, missing))}; a trace record holds "
                       f"{', '.join((*REQUIRED, 'request'))}", n, 1)
    for key, kind in {**REQUIRED, **OPTIONAL}.items():
        if key in rec and not _is(rec[key], kind):
            raise _fail(f, f"{key}: expected {_name(kind)}, found {json.dumps(rec[key])[:40]}", n, 1)
    if rec.get("accepted", 0) < 0:
        raise _fail(f, f"accepted: expected a count of tokens (>= 0), found {rec['accepted']}", n, 1)
    if "rank" in rec and rec["rank"] != rank:
        raise _fail(f, f"rank: the record says rank {rec['rank']} but the file is rank {rank}'s", n, 1)
    return rec


def _is(value, kind) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):  # JSON true is not a number here
        return bool in kinds
    return isinstance(value, kinds)


def _name(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    words = {int: "an integer", str: "a string", list: "a list", type(None): "null"}
    return " or ".join(words[k] for k in kinds)


def _one_plan(traces: dict[int, list[dict]], origin: dict[int, Path]) -> None:
    """Traces of two plans never compare: name a file of each fingerprint."""
    first: dict[str, int] = {}  # fingerprint -> the first rank that wrote it
    for rank, records in sorted(traces.items()):
        for rec in records:
            if rec.get("fingerprint") is not None:
                first.setdefault(rec["fingerprint"], rank)
    if len(first) < 2:
        return
    (fa, ra), (fb, rb) = list(first.items())[:2]
    raise _fail(origin[rb], f"traces of two plans: {origin[ra]} has plan fingerprint {fa[:16]}, "
                            f"{origin[rb]} has {fb[:16]}; compare the traces of one run")
