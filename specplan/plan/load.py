"""Reading plan.json: every key checked, the fingerprint recomputed, hand edits refused.

`load_plan` is the one way into a Plan from a file or parsed JSON (check, preflight, bind, the
generated module and the simulator all come through it). What it refuses, as `PlanFileError`
(exit 2, no traceback): a file that is not JSON or not a plan of this schema version, every
missing, unknown or mistyped key (named by its dotted path, all at once), references to
families, sites or boundaries the plan does not define, and content whose recomputed
fingerprint differs from the one recorded ("plan.json was edited after compile").
"""

from __future__ import annotations

import json
import os
from typing import Any

from specplan.errors import Diagnostic, UserError
from specplan.io.files import not_readable, read_bounded
from specplan.ir.nodes import ROUNDS
from specplan.plan.artifact import SCHEMA_VERSION, Plan, fingerprint
from specplan.plan.codec import ABSENT, Problem, decode
from specplan.plan.invariants import invariants


MAX_PLAN_BYTES = 64 << 20  # plan.json: rank classes, not ranks, so far below this at any world


# What load_plan reads: a Plan (as is), plan.json's path, or its parsed JSON.
PlanSource = Plan | str | os.PathLike[str] | dict[str, Any]


class PlanFileError(UserError):
    """plan.json is unreadable, malformed, of another version, or edited after compile."""


def load_plan(source: PlanSource, *, name: str | None = None, trusted: bool = False) -> Plan:
    """A Plan from a path to plan.json, its parsed content, or a Plan (returned as is).

    `trusted` skips the fingerprint comparison, for plans a test edits on purpose to show
    what the verifier finds; every structural check still runs.
    """
    if isinstance(source, Plan):
        return source
    if isinstance(source, (str, os.PathLike)):
        name = name or str(source)
        return from_json(_read_json(name), name=name, trusted=trusted)
    return from_json(source, name=name or "plan.json", trusted=trusted)


def from_json(data: object, *, name: str = "plan.json", trusted: bool = False) -> Plan:
    def fail(problems: list[tuple[str, str]]) -> PlanFileError:
        return PlanFileError([Diagnostic(name, None, None, p, m) for p, m in problems])

    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise fail([("", _not_a_plan(data))])
    problems = [] if trusted else _edited(data)
    try:
        plan = decode(Plan, data)
    except Problem as exc:
        raise fail(problems + exc.problems) from None
    problems += _references(plan)
    if not problems and not trusted:  # read through the references: only once they hold
        problems += invariants(plan)
    if problems:
        raise fail(problems)
    return plan


def _read_json(path: str) -> object:
    def fail(message: str, line: int | None = None, col: int | None = None) -> PlanFileError:
        return PlanFileError([Diagnostic(path, line, col, "", message)])

    why = not_readable(path, MAX_PLAN_BYTES)
    if why == "is a directory":
        raise fail("is a directory, not a plan.json")
    if why is not None:
        raise fail(why)
    try:
        text = read_bounded(path, MAX_PLAN_BYTES).decode("utf-8")
        return json.loads(text)
    except FileNotFoundError:
        raise fail("no such file") from None
    except UnicodeDecodeError:
        raise fail("not UTF-8 text: not a plan.json") from None
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:  # before ValueError: it is one
        raise fail(f"malformed JSON: {exc.msg}", exc.lineno, exc.colno) from None
    except ValueError as exc:  # grew past the limit since the stat
        raise fail(str(exc)) from None
    except RecursionError:
        raise fail("malformed JSON: nested too deeply") from None


def _not_a_plan(data: object) -> str:
    if not isinstance(data, dict):
        return f"not a specplan plan: expected a JSON object, found {type(data).__name__}"
    found = data.get("schema_version", "no schema_version")
    if isinstance(found, int) and not isinstance(found, bool) and 0 < found < SCHEMA_VERSION:
        return (f"plan written by an older specplan (schema_version {found}, this one reads "
                f"{SCHEMA_VERSION}): re-run `specplan compile` on its spec")
    return f"not a specplan plan: expected schema_version {SCHEMA_VERSION}, found {found!r}"


def _edited(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The fingerprint recomputed from the content, compared with the one recorded."""
    recorded = data.get("fingerprint")
    try:
        actual = fingerprint(data)
    except (KeyError, TypeError, AttributeError, ValueError):
        actual = None  # too broken to hash: the key errors below say why
    if actual is not None and recorded == actual:
        return []
    what = (f"its content hashes to {actual} but its fingerprint is {recorded!r}" if actual
            else "its content no longer has the shape compile writes")
    return [("", f"plan.json was edited after compile: {what}; re-run `specplan compile` on the "
                 f"spec instead of editing the plan")]


def _references(plan: Plan) -> list[tuple[str, str]]:
    """Names and ids that must point at something the plan defines (else a reader crashes)."""
    out = []
    families = plan.family
    for key in ("pp", "replica"):
        if key not in families:
            out.append(("families", f"no {key!r} family (every plan defines it)"))
    for i, f in enumerate(plan.families):
        if f.rule.alias and f.rule.alias not in families:
            out.append((f"families[{i}].rule.alias", f"names no family: {f.rule.alias!r}"))
    for i, s in enumerate(plan.sites):
        out += _member(plan, f"sites[{i}]", s.family, s.source_member)
        if s.boundary is not None and s.boundary >= len(plan.boundaries):
            out.append((f"sites[{i}].boundary", f"no boundary {s.boundary} "
                                                f"(the plan has {len(plan.boundaries)})"))
    for i, b in enumerate(plan.boundaries):
        if b.id != i:
            out.append((f"boundaries[{i}].id", f"boundary ids run 0, 1, ...: expected {i}, found {b.id}"))
        out += _member(plan, f"boundaries[{i}]", b.family, b.source_member)
        out += [(f"boundaries[{i}].sites", f"names no site: {s!r}") for s in b.sites if s not in plan.site]
    for i, r in enumerate(plan.relays):
        if r.site not in plan.site:
            out.append((f"pipeline.relay.sites[{i}].site", f"names no site: {r.site!r}"))
        out += _member(plan, f"pipeline.relay.sites[{i}]", r.family, r.source_member)
    return out + _classes(plan)


def _classes(plan: Plan) -> list[tuple[str, str]]:
    out = []
    families = plan.family
    stages = sorted(c.stage for c in plan.rank_classes)
    if "pp" in families and stages != list(range(families["pp"].group_size)):
        out.append(("rank_classes", f"expected one class per pipeline stage 0 .. "
                                    f"{families['pp'].group_size - 1}, found stages {stages}"))
    for i, c in enumerate(plan.rank_classes):
        for kind in ROUNDS:
            for j, op in enumerate(c.program.round(kind)):
                path = f"rank_classes[{i}].program.{kind}[{j}]"
                if op.family and op.family not in families:
                    out.append((f"{path}.family", f"names no family: {op.family!r}"))
                if op.boundary is not ABSENT and op.boundary >= len(plan.boundaries):
                    out.append((f"{path}.boundary", f"no boundary {op.boundary}"))
                if op.site and op.site not in plan.relay:
                    out.append((f"{path}.site", f"names no relay: {op.site!r}"))
    return out


def _member(plan: Plan, path: str, family: str, member: int) -> list[tuple[str, str]]:
    fam = plan.family.get(family)
    if fam is None:
        return [(f"{path}.family", f"names no family: {family!r}; families: {', '.join(plan.family)}")]
    if member >= fam.group_size:
        return [(f"{path}.source_member", f"{member} is outside the {family} groups of "
                                          f"{fam.group_size} ranks")]
    return []
