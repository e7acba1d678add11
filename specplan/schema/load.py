"""YAML file -> Spec. Every error of a file is gathered and raised at once as SpecError."""

from __future__ import annotations

import difflib
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from specplan.errors import Diagnostic, SpecError
from specplan.schema.checks import cross_checks
from specplan.schema.limits import limit_checks
from specplan.schema.model import Spec
from specplan.schema.yaml_source import PathKey, YamlSource, dotted, kind_of, read_source


def load_spec(path: str | Path) -> Spec:
    """Read, type-check and cross-check a topology YAML file."""
    return spec_from_source(read_source(path))


def load_spec_text(text: str, name: str) -> Spec:
    """`load_spec` of YAML text held in memory; diagnostics name `name`."""
    return spec_from_source(read_source(name, text=text))


def spec_from_source(source: YamlSource) -> Spec:
    """Type-check and cross-check a read document (one file, or a deployment's merge)."""
    try:
        spec = Spec.model_validate(source.data)
    except ValidationError as exc:
        found = (_translate(err, source) for err in exc.errors())
        raise SpecError(_dedupe(source.problems + [d for d in found if not _explained(d, source)])) from None
    if source.problems:
        raise SpecError(source.problems)
    spec._source = source
    problems = limit_checks(spec, source) + cross_checks(spec, source)
    if problems:
        raise SpecError(problems)
    return spec


def _explained(diag: Diagnostic, source: YamlSource) -> bool:
    """A schema error under a path the YAML reader already refused adds nothing."""
    return any(diag.path == dotted(p) or diag.path.startswith((dotted(p) + ".", dotted(p) + "["))
               for p in source.problem_paths if p)


def _dedupe(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    seen: dict[tuple[int | None, int | None, str, str], Diagnostic] = {}
    for d in diags:
        # union branches repeat one error per branch; distinct missing keys all count
        seen.setdefault((d.line, d.col, d.path, d.message if "missing" in d.message else ""), d)
    return list(seen.values())


def _translate(err: ErrorDetails, source: YamlSource) -> Diagnostic:
    loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
    kind, value = err["type"], err.get("input")
    if kind == "extra_forbidden":
        return source.diag(loc, _unknown_key(loc), key=True)
    if kind == "missing":
        return source.diag(loc[:-1], f"missing required key {loc[-1]!r}")
    return source.diag(loc, _message(kind, err, value, _model_at(loc[:-1]), loc))


def _is_union_tag(part: Any) -> bool:
    # pydantic names union / constrained branches in `loc` ("list[...]", "function-after"...)
    return isinstance(part, str) and ("[" in part or part.startswith("function-"))


def _message(kind: str, err: ErrorDetails, value: Any, parent: type | None, loc: PathKey) -> str:
    found = f"found {kind_of(value)}"
    expected = {
        "int_type": "expected an integer", "int_from_float": "expected an integer",
        "bool_type": "expected true or false", "string_type": "expected a string",
        "list_type": "expected a list", "model_type": "expected a mapping",
        "dict_type": "expected a mapping", "model_attributes_type": "expected a mapping",
    }.get(kind)
    if expected:
        return f"{expected}, {found}"
    ctx = err.get("ctx") or {}
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected', '').replace(' or ', ', ')}, {found}{_did_you_mean(value, loc)}"
    if kind in ("greater_than_equal", "greater_than") and isinstance(ctx.get("gt"), float):
        return f"expected a number > {ctx['gt']:g}, {found}"
    if kind == "finite_number":
        return f"expected a number > 0 (finite), {found}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        what = "a positive integer" if bound == 1 else f"an integer >= {bound}"
        return f"expected {what}, {found}"
    if kind == "less_than_equal":
        return f"expected at most {ctx['le']:,} (specplan's limit for this key), {found}"
    if kind == "too_long":
        return f"expected at most {ctx.get('max_length', 0):,} items (specplan's limit), found {len(value)}"
    if kind == "string_too_long":
        return f"expected at most {ctx['max_length']} characters (specplan's limit), {found}"
    if kind == "string_pattern_mismatch":
        return f"expected a name matching [a-z0-9][a-z0-9_.-]*, {found}"
    return f"{err['msg'].lower()}, {found}"


def _did_you_mean(value: Any, loc: PathKey) -> str:
    if not isinstance(value, str):
        return ""
    parent = _model_at(loc[:-1])
    field = parent.model_fields.get(loc[-1]) if parent else None
    choices = [str(c) for c in typing.get_args(_strip(field.annotation))] if field else []
    close = difflib.get_close_matches(value.lower(), choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown_key(loc: PathKey) -> str:
    model = _model_at(loc[:-1])
    key = str(loc[-1])
    if model is None:
        return f"unknown key {key!r}"
    valid = list(model.model_fields)
    close = difflib.get_close_matches(key, valid, n=1)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    return f"unknown key {key!r}; valid keys: {', '.join(valid)}"


def _model_at(loc: PathKey) -> type[BaseModel] | None:
    """The model class that validates the mapping at `loc`, if any."""
    current: Any = Spec
    for part in loc:
        current = _strip(current)
        if isinstance(part, int):
            args = typing.get_args(current)
            current = args[0] if args else None
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(part)
        if field is None:
            return None
        current = field.annotation
    current = _strip(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _strip(tp: Any) -> Any:
    """Optional[X] -> X; Annotated[X, ...] -> X."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            tp = args[0] if len(args) == 1 else tp
            if len(args) != 1:
                return tp
        else:
            return tp
