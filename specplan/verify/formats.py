"""How `specplan check` prints its findings: terminal text, JSON, SARIF 2.1.0 and JUnit XML.

Text is one line per finding (severity, site, group, the short reason), wrapped between words to
the terminal (`COLUMNS`, 100 when piped; a name is never cut); findings that say the same thing at
several sites are folded into one line ("likewise at ..."), and WARNs of one class into one line
with their count; `verbose` lists each, with the full explanation, the fix and the YAML line.
The machine formats carry every finding unfolded. Untrusted text is printed literally (no markup).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
from typing import NamedTuple
from xml.etree import ElementTree as ET

from specplan.version import __version__
from specplan.verify.baseline import ID_KEY, Baseline, finding_id
from specplan.verify.findings import SEVERITIES, Finding

FORMATS = ("text", "json", "sarif", "junit")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
PIPED_WIDTH = 100  # the width of output piped without COLUMNS
_SARIF_LEVEL = {"ERROR": "error", "WARN": "warning", "INFO": "note"}


class Subject(NamedTuple):
    """What was checked: the plan's name, its spec file (may be "") and fingerprint."""

    name: str
    spec_file: str
    fingerprint: str


class Fold(NamedTuple):
    """One printed line: a finding and the sites where the same finding recurs."""

    first: Finding
    also: tuple[Finding, ...]


def terminal_width() -> int:
    """COLUMNS when set, the terminal's width on a terminal, else (piped) 100."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((PIPED_WIDTH, 24)).columns if sys.stdout.isatty() else PIPED_WIDTH


def at_least(findings: list[Finding], severity: str) -> list[Finding]:
    """The findings at `severity` or worse (error < warn < info in the order SEVERITIES gives)."""
    keep = SEVERITIES[: SEVERITIES.index(severity.upper()) + 1]
    return [f for f in findings if f.severity in keep]


def short_reason(f: Finding) -> str:
    """The message up to its first explanation (`: ` or `; `)."""
    return re.split(r": |; ", f.message, maxsplit=1)[0]


def rule_id(f: Finding) -> str:
    """A stable id of the finding's class: its short reason without names and numbers."""
    text = _anonymous(f, short_reason(f)).lower()
    slug = re.sub(r"[^a-z]+", "-", text.replace("<site>", "").replace("<decision>", "")).strip("-")
    return f"{f.severity.lower()}/{slug[:60].rstrip('-') or 'finding'}"


def fold(findings: list[Finding]) -> list[Fold]:
    """Group findings whose text is the same once site and decision names are taken out."""
    order: list[tuple] = []
    groups: dict[tuple, list[Finding]] = {}
    for f in findings:
        key = (f.severity, f.group, f.round, _anonymous(f, f.message), _anonymous(f, f.fix))
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(f)
    return [Fold(groups[k][0], tuple(groups[k][1:])) for k in order]


def render_text(subject: Subject, findings: list[Finding], *, width: int, verbose: bool,
                shown_of: int | None = None, baselined: int = 0) -> str:
    """The terminal report; `shown_of` is the count before a severity filter, when one applied;
    `baselined` the findings left out because the baseline holds them. Lines wrap at `width`
    between words, so no name is ever cut; WARNs of one class (rule_id) are one line with
    their count unless `verbose`."""
    note = f"; {baselined} more in the baseline" if baselined else ""
    if not findings and not shown_of and baselined:
        return "\n".join(_wrap(f"{subject.name}: no new findings; {baselined} in the baseline "
                               "(--format json lists them)", width)) + "\n"
    if not findings and not shown_of:
        return "\n".join(_wrap(f"{subject.name}: no findings; the plan is free of desyncs and "
                               f"deadlocks (fingerprint {subject.fingerprint[:16]})", width)) + "\n"
    lines = _wrap(f"{subject.name}: {_counts(findings)}"
                  + (f" (of {shown_of} findings)" if shown_of else "") + note, width)
    for item in fold(findings) if verbose else _collapsed(fold(findings)):
        if isinstance(item, Collapsed):
            lines.extend(_class_line(item, width))
            continue
        lines.extend(_one_line(item, width))
        if verbose:
            lines.extend(_explanation(item, subject, width))
    if findings and not verbose:
        lines.extend(_wrap("-v shows each finding's explanation, fix and YAML line", width))
    return "\n".join(lines) + "\n"


def to_json(findings: list[Finding], baseline: Baseline | None = None) -> str:
    """{"findings": [...]}; against a baseline each finding also carries its `id`
    (verify/baseline.py) and `baseline`: new or unchanged, and "absent" lists the baseline's
    findings no longer found. (Without one the output is as before baselines: an id is
    recomputed from the fields when this output is read back as a baseline.)"""
    if baseline is None:
        return json.dumps({"findings": [f.to_dict() for f in findings]}, separators=(",", ":")) + "\n"
    rows = [{"id": finding_id(f), **f.to_dict(), "baseline": baseline.state(f)} for f in findings]
    out = {"findings": rows, "absent": baseline.absent(findings)}
    return json.dumps(out, separators=(",", ":")) + "\n"


def to_sarif(subject: Subject, findings: list[Finding], baseline: Baseline | None = None) -> str:
    """SARIF 2.1.0: each result carries `fingerprints` {"specplan/v1": id}; against a baseline,
    `baselineState` new or unchanged, and one result with baselineState absent per baseline
    finding no longer found."""
    rules: dict[str, dict] = {}
    results = []
    for f in findings:
        rid = rule_id(f)
        rules.setdefault(rid, {"id": rid, "shortDescription": {"text": _anonymous(f, short_reason(f))},
                               "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]}})
        result: dict = {"ruleId": rid, "level": _SARIF_LEVEL[f.severity],
                  "message": {"text": f"{f.message}. Fix: {f.fix}" if f.fix else f.message},
                  "fingerprints": {ID_KEY: finding_id(f)},
                  "properties": {k: v for k, v in f.to_dict().items() if k not in ("message", "fix")}}
        if baseline is not None:
            result["baselineState"] = baseline.state(f)
        if subject.spec_file:
            region = {"startLine": f.line} if f.line else None
            loc = {"artifactLocation": {"uri": subject.spec_file}}
            result["locations"] = [{"physicalLocation": {**loc, **({"region": region} if region else {})}}]
        results.append(result)
    results += [_absent_result(row) for row in (baseline.absent(findings) if baseline else [])]
    driver = {"name": "specplan", "version": __version__, "rules": list(rules.values()),
              "informationUri": "https://pypi.org/project/specplan/"}
    run = {"tool": {"driver": driver}, "results": results,
           "properties": {"plan": subject.name, "fingerprint": subject.fingerprint}}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=1) + "\n"


def _absent_result(row: dict) -> dict:
    level = _SARIF_LEVEL.get(str(row.get("severity")), "note")
    props = {k: v for k, v in row.items() if k not in ("id", "message")}
    return {"ruleId": f"{str(row.get('severity') or 'info').lower()}/absent", "level": level,
            "message": {"text": str(row.get("message") or "")}, "fingerprints": {ID_KEY: row["id"]},
            "baselineState": "absent", "properties": props}


def to_junit(subject: Subject, findings: list[Finding], baseline: Baseline | None = None) -> str:
    """One test case per finding (ERROR: a failure, unless the baseline holds it: then skipped,
    "in the baseline"); a clean plan is one passing case."""
    known = {f for f in findings if baseline is not None and baseline.state(f) == "unchanged"}
    errors = sum(1 for f in findings if f.severity == "ERROR" and f not in known)
    suite = ET.Element("testsuite", name=f"specplan check {subject.name}",
                       tests=str(max(len(findings), 1)), failures=str(errors), errors="0",
                       skipped=str(len(known)))
    if not findings:
        ET.SubElement(suite, "testcase", classname="specplan.check", name="free of desyncs and deadlocks")
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=f"specplan.check.{f.round or 'plan'}",
                             name=f"{f.severity} {_where(f)}: {short_reason(f)}")
        detail = f"{f.message}\nfix: {f.fix}" + (f"\nat: {subject.spec_file}:{f.line}" if f.line else "")
        if f in known:
            ET.SubElement(case, "skipped", message=f"in the baseline {baseline.path}"
                          if baseline else "in the baseline").text = detail
        elif f.severity == "ERROR":
            ET.SubElement(case, "failure", message=short_reason(f), type=rule_id(f)).text = detail
        else:
            ET.SubElement(case, "system-out").text = detail
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _anonymous(f: Finding, text: str) -> str:
    names = [n for n in (f.site, *(f.decision or "").split(",")) if n]
    for name in sorted(names, key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", "<site>" if name == f.site else "<decision>", text)
    return text


def _where(f: Finding) -> str:
    return f"{_name(f)} [{f.group}]" if f.group else _name(f)


def _one_line(item: Fold, width: int) -> list[str]:
    """`SEVERITY site/decision [group]  reason; likewise at ...`, or with `+N` after the group
    when the list of the other sites does not fit on one line."""
    f = item.first
    line = f"{f.severity:<5} {_where(f)}  {_unnamed(f)}"
    if not item.also:
        return _wrap(line, width)
    full = line + "; likewise at " + ", ".join(_name(o) for o in item.also)
    if len(full) <= width:
        return [full]
    return _wrap(f"{f.severity:<5} {_where(f)} +{len(item.also)}  {_unnamed(f)}", width)


class Collapsed(NamedTuple):
    """WARNs of one class (rule_id) at several places: one line with their count."""

    items: tuple[Fold, ...]


def _collapsed(items: list[Fold]) -> list[Fold | Collapsed]:
    """The folds, with every WARN class of two or more folds collapsed where it first appears."""
    classes: dict[str, list[Fold]] = {}
    for item in items:
        if item.first.severity == "WARN":
            classes.setdefault(rule_id(item.first), []).append(item)
    out: list[Fold | Collapsed] = []
    for item in items:
        same = classes.get(rule_id(item.first)) if item.first.severity == "WARN" else None
        if not same or len(same) < 2:
            out.append(item)
        elif same[0] is item:
            out.append(Collapsed(tuple(same)))
    return out


def _class_line(c: Collapsed, width: int) -> list[str]:
    count = sum(1 + len(i.also) for i in c.items)
    groups = sorted({i.first.group for i in c.items if i.first.group})
    at = f" [{', '.join(groups)}]" if groups else ""
    return _wrap(f"WARN  {_unnamed(c.items[0].first)}{at}: {count} findings of this class "
                 f"(-v lists each)", width)


def _unnamed(f: Finding) -> str:
    """The short reason without the site or decision the line already names ("is" too)."""
    text = short_reason(f)
    for name in sorted(filter(None, (f.site, f.decision, f.gate)), key=len, reverse=True):
        if text.startswith(name + " "):
            text = text[len(name) + 1:]
            return text[3:] if text.startswith("is ") else text
    return text


def _name(f: Finding) -> str:
    return "/".join(x for x in (f.site, f.decision) if x) or (f.gate and f"gate {f.gate}") or "plan"


def _explanation(item: Fold, subject: Subject, width: int) -> list[str]:
    f = item.first
    wrap = textwrap.TextWrapper(width=max(width, 40), initial_indent="      ",
                                subsequent_indent="      ", break_on_hyphens=False)
    out = wrap.wrap(f.message) + wrap.wrap(f"fix: {f.fix}") + wrap.wrap(f"round: {f.round or '-'}")
    if item.also:
        out += wrap.wrap("likewise at " + ", ".join(_name(o) for o in item.also))
    if f.line:
        out += wrap.wrap(f"at: {subject.spec_file}:{f.line}")
    if f.ranks:
        out += wrap.wrap(f"ranks: {', '.join(map(str, f.ranks))}")
    return out


def _counts(findings: list[Finding]) -> str:
    counts = [(s, sum(1 for f in findings if f.severity == s)) for s in SEVERITIES]
    return ", ".join(f"{n} {s}" for s, n in counts if n) or "no findings at this severity"


def _wrap(line: str, width: int) -> list[str]:
    """`line` broken between words at `width`, continuation lines indented; a word longer than
    the width is kept whole on its own line rather than cut."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width=max(width, 20), subsequent_indent="      ",
                         break_long_words=False, break_on_hyphens=False) or [line]
