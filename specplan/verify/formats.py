"""How `specplan check` prints its findings: terminal text, JSON, SARIF 2.1.0 and JUnit XML.

Text is one line per finding (severity, site, group, the short reason), fitted to the terminal
(`COLUMNS`, 80 when piped); findings that say the same thing at several sites are folded into one
line ("likewise at ..."); `verbose` adds the full explanation, the fix and the YAML line.
The machine formats carry every finding unfolded. Untrusted text is printed literally (no markup).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import textwrap
from dataclasses import dataclass
from xml.etree import ElementTree as ET

from specplan.version import __version__
from specplan.verify.findings import SEVERITIES, Finding

FORMATS = ("text", "json", "sarif", "junit")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {"ERROR": "error", "WARN": "warning", "INFO": "note"}


@dataclass(frozen=True)
class Subject:
    """What was checked: the plan's name, its spec file (may be "") and fingerprint."""

    name: str
    spec_file: str
    fingerprint: str


@dataclass(frozen=True)
class Fold:
    """One printed line: a finding and the sites where the same finding recurs."""

    first: Finding
    also: tuple[Finding, ...]


def terminal_width() -> int:
    """COLUMNS when set, the terminal's width on a terminal, else 80."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80


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
                shown_of: int | None = None) -> str:
    """The terminal report; `shown_of` is the count before a severity filter, when one applied."""
    if not findings and not shown_of:
        return (f"{subject.name}: no findings; the plan is free of desyncs and deadlocks "
                f"(fingerprint {subject.fingerprint[:16]})\n")
    lines = [_fit(f"{subject.name}: {_counts(findings)}"
                  + (f" (of {shown_of} findings)" if shown_of else ""), width)]
    for item in fold(findings):
        lines.append(_one_line(item, width))
        if verbose:
            lines.extend(_explanation(item, subject, width))
    if findings and not verbose:
        lines.append(_fit("-v shows each finding's explanation, fix and YAML line", width))
    return "\n".join(lines) + "\n"


def to_json(findings: list[Finding]) -> str:
    return json.dumps({"findings": [f.to_dict() for f in findings]}, separators=(",", ":")) + "\n"


def to_sarif(subject: Subject, findings: list[Finding]) -> str:
    rules: dict[str, dict] = {}
    results = []
    for f in findings:
        rid = rule_id(f)
        rules.setdefault(rid, {"id": rid, "shortDescription": {"text": _anonymous(f, short_reason(f))},
                               "defaultConfiguration": {"level": _SARIF_LEVEL[f.severity]}})
        result = {"ruleId": rid, "level": _SARIF_LEVEL[f.severity],
                  "message": {"text": f"{f.message}. Fix: {f.fix}" if f.fix else f.message},
                  "properties": {k: v for k, v in f.to_dict().items() if k not in ("message", "fix")}}
        if subject.spec_file:
            region = {"startLine": f.line} if f.line else None
            loc = {"artifactLocation": {"uri": subject.spec_file}}
            result["locations"] = [{"physicalLocation": {**loc, **({"region": region} if region else {})}}]
        results.append(result)
    driver = {"name": "specplan", "version": __version__, "rules": list(rules.values()),
              "informationUri": "https://pypi.org/project/specplan/"}
    run = {"tool": {"driver": driver}, "results": results,
           "properties": {"plan": subject.name, "fingerprint": subject.fingerprint}}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=1) + "\n"


def to_junit(subject: Subject, findings: list[Finding]) -> str:
    """One test case per finding (ERROR: a failure); a clean plan is one passing case."""
    errors = sum(1 for f in findings if f.severity == "ERROR")
    suite = ET.Element("testsuite", name=f"specplan check {subject.name}",
                       tests=str(max(len(findings), 1)), failures=str(errors), errors="0", skipped="0")
    if not findings:
        ET.SubElement(suite, "testcase", classname="specplan.check", name="free of desyncs and deadlocks")
    for f in findings:
        case = ET.SubElement(suite, "testcase", classname=f"specplan.check.{f.round or 'plan'}",
                             name=f"{f.severity} {_where(f)}: {short_reason(f)}")
        detail = f"{f.message}\nfix: {f.fix}" + (f"\nat: {subject.spec_file}:{f.line}" if f.line else "")
        if f.severity == "ERROR":
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


def _one_line(item: Fold, width: int) -> str:
    """`SEVERITY site/decision [group]  reason; likewise at ...`, or with `+N` after the group
    when the list of the other sites does not fit."""
    f = item.first
    line = f"{f.severity:<5} {_where(f)}  {_unnamed(f)}"
    if not item.also:
        return _fit(line, width)
    full = line + "; likewise at " + ", ".join(_name(o) for o in item.also)
    if len(full) <= width:
        return full
    return _fit(f"{f.severity:<5} {_where(f)} +{len(item.also)}  {_unnamed(f)}", width)


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


def _fit(line: str, width: int) -> str:
    return line if len(line) <= width else line[: max(width - 1, 1)] + "…"
