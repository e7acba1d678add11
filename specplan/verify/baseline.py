"""A baseline of standing findings: `specplan check --write-baseline FILE` records today's,
`--baseline FILE` reports only the findings not in it (and exits 3 only for new ERRORs).

A finding's identity is `finding_id`: a hash of what the finding says and where in the plan it
is, never where in the YAML it was written. It covers severity, site, decision, group, round and
message; it leaves out the YAML line (a spec edited above the key moves it), the example ranks
(a few of many, picked for illustration) and the fix (advice, reworded freely). So the same
finding of the same plan has the same id in every run, and moving lines of the spec keeps it.

FILE may be what `--write-baseline` wrote, a `check --format json` output or a
`check --format sarif` output: all three carry the findings (SARIF by its `fingerprints`).
A deployment's baseline is what `--write-baseline` writes for it (or its `check --json` output
against a baseline, which carries each finding's id): its findings' ids include where each is
(prefill, decode, or across the instances), so the same finding in both instances is two.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from specplan.errors import Diagnostic, SpecError
from specplan.verify.findings import Record

ID_KEY = "specplan/v1"  # SARIF fingerprints key (and the version of `finding_id`)
FORMAT = 1
ACROSS = "across"  # a deployment's scope of the findings across its instances
MAX_BASELINE_BYTES = 64 << 20
_IDENTITY = ("severity", "site", "decision", "group", "round", "message")
_CROSS_IDENTITY = ("severity", "kind", "message")


@dataclass(frozen=True)
class Baseline:
    """The ids a baseline file holds, with what each finding said (for the absent ones).
    `scope`: where in a deployment a finding is (prefill, decode, across); "" for one spec."""

    path: str
    findings: dict[str, dict]  # id -> the finding as JSON, as far as the file gives it

    def state(self, f: Record | dict[str, Any], scope: str = "") -> str:
        """SARIF's baselineState of a current finding: unchanged (in the file) or new."""
        return "unchanged" if finding_id(f, scope) in self.findings else "new"

    def new(self, findings: list, scope: str = "") -> list:
        return [f for f in findings if finding_id(f, scope) not in self.findings]

    def absent(self, findings: list, scope: str = "", *, seen: set[str] | None = None) -> list[dict]:
        """The baseline's findings no longer found (fixed, or the plan changed); `seen`: the
        ids found in a deployment's other scopes."""
        now = {finding_id(f, scope) for f in findings} | (seen or set())
        return [{"id": k, **v} for k, v in self.findings.items() if k not in now]


def finding_id(f: Record | dict[str, Any], scope: str = "") -> str:
    """The finding's identity: 16 hex digits of a SHA-256 over its identity fields (a
    deployment's cross-instance finding: severity, kind, message; its `where` holds lines),
    and, in a deployment, its scope."""
    data = f if isinstance(f, dict) else f.to_dict()
    keys = _CROSS_IDENTITY if "kind" in data else _IDENTITY
    fields = [data.get(k) for k in keys]
    text = json.dumps([scope, *fields] if scope else fields, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def baseline_json(findings: list, plan: str) -> str:
    """What --write-baseline writes: the findings as `check --json` prints them, each with its
    id; `findings` holds Findings, or (scope, finding) pairs for a deployment."""
    pairs = [f if isinstance(f, tuple) else ("", f) for f in findings]
    rows = [{"id": finding_id(f, scope), **({"scope": scope} if scope else {}), **f.to_dict()}
            for scope, f in pairs]
    return json.dumps({"specplan_baseline": FORMAT, "plan": plan, "findings": rows}, indent=1) + "\n"


def write_baseline(path: str, findings: list, plan: str) -> None:
    """Atomically (files.py `write_atomic`): a reader never sees half a baseline."""
    from specplan.io.files import write_atomic

    write_atomic(path, baseline_json(findings, plan), what="the baseline")


def read_baseline(path: str) -> Baseline:
    """A baseline file, a `check --format json` output or a SARIF log; exit 2 (SpecError) when
    FILE is none of these."""
    from specplan.io.files import not_readable, read_bounded

    problem = not_readable(path, MAX_BASELINE_BYTES)
    if problem:
        raise _bad(path, problem)
    try:
        data = json.loads(read_bounded(path, MAX_BASELINE_BYTES))
    except (OSError, ValueError, RecursionError) as exc:
        raise _bad(path, f"expected a JSON baseline, found unreadable JSON ({exc})") from None
    rows = _sarif_rows(data) if isinstance(data, dict) and "runs" in data else _json_rows(data)
    if rows is None:
        raise _bad(path, 'expected a baseline (--write-baseline), a `check --format json` or a '
                         '`check --format sarif` output, found JSON without "findings" or "runs"')
    return Baseline(path, rows)


def _json_rows(data: object) -> dict[str, dict[str, Any]] | None:
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list):
        return None
    rows = [r for r in data["findings"] if isinstance(r, dict)]
    instances = data.get("instances")
    if isinstance(instances, dict):  # a deployment's `check --json`: scope each finding
        rows = [{"scope": ACROSS, **r} for r in rows]
        rows += [{"scope": str(role), **r} for role, found in instances.items()
                 if isinstance(found, list) for r in found if isinstance(r, dict)]
    return {str(r.get("id") or finding_id(r, str(r.get("scope") or ""))):
            {k: r.get(k) for k in ("scope", *_IDENTITY, "kind") if k in r} for r in rows}


def _sarif_rows(data: dict) -> dict[str, dict] | None:
    runs = data.get("runs")
    if not isinstance(runs, list):
        return None
    out: dict[str, dict] = {}
    for run in (r for r in runs if isinstance(r, dict)):
        for result in (r for r in run.get("results") or [] if isinstance(r, dict)):
            if result.get("baselineState") == "absent":
                continue  # an absent result is the old run's, not this one's
            key = (result.get("fingerprints") or {}).get(ID_KEY)
            if isinstance(key, str):
                props = result.get("properties") or {}
                out[key] = {k: props.get(k) for k in _IDENTITY if k != "message"} | {
                    "message": (result.get("message") or {}).get("text")}
    return out


def _bad(path: str, message: str) -> SpecError:
    return SpecError([Diagnostic(path, None, None, "", message)])
