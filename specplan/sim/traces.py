"""`simulate --trace-dir DIR`: every rank writes the runtime's own trace (runtime/tracing.py)
to DIR/rank<R>.jsonl: its converges and, per decode round and request, the accepted length,
so `specplan diff` reads a simulated run as it reads a deployment's, and `diff --acceptance A B`
compares two simulated runs."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from specplan.errors import Diagnostic, SpecError


@contextlib.contextmanager
def trace_into(trace_dir: str):
    """While it lasts, the rank processes trace into `trace_dir` (they inherit
    SPECPLAN_TRACE_DIR, which the runtime reads when the plan names no trace_dir; the sim's plan
    never does); the caller's environment is restored after it, so a run in this process (the
    API, a test) leaves no tracing behind. A folder that already holds a run's traces is refused:
    two runs would mix in one."""
    out = Path(trace_dir)
    if out.exists() and not out.is_dir():
        raise SpecError([Diagnostic(trace_dir, None, None, "", "--trace-dir: not a folder")])
    old = sorted(p.name for p in out.glob("rank*.jsonl")) if out.is_dir() else []
    if old:
        raise SpecError([Diagnostic(trace_dir, None, None, "", f"--trace-dir already holds traces "
                                    f"({', '.join(old[:3])}{', ...' if len(old) > 3 else ''}): "
                                    "give a new or empty folder, one run per folder")])
    old_env = os.environ.get("SPECPLAN_TRACE_DIR")
    os.environ["SPECPLAN_TRACE_DIR"] = str(out.resolve())
    try:
        yield
    finally:
        if old_env is None:
            os.environ.pop("SPECPLAN_TRACE_DIR", None)
        else:
            os.environ["SPECPLAN_TRACE_DIR"] = old_env


def acceptance(outcome) -> dict:
    """Mean accepted length (tokens committed per request per decode round) per replica and
    overall, from the ranks' records (one rank speaks for its replica)."""
    first: dict[int, dict] = {}
    for x in outcome.results.values():
        if not x.get("error"):
            first.setdefault(x["replica"], x)
    per, every = {}, []
    for replica, x in sorted(first.items()):
        lens = [n for r, row in x["commits"].items() if r != "0" for n in row]
        every += lens
        per[str(replica)] = sum(lens) / len(lens) if lens else 0.0
    return {"mean": sum(every) / len(every) if every else 0.0, "replicas": per}
