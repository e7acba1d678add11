"""Spec data -> YAML text in the field order of the schema, and back through load_spec.

Only what the data holds is written (callers pass `model_dump(exclude_unset=True)`-style
dicts), so a value the user never wrote stays unwritten and keeps its default meaning.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel

from specplan.schema import Spec
from specplan.schema.load import load_spec_text

_PLAIN = re.compile(r"^[A-Za-z_/.][A-Za-z0-9_./@:+-]*$")
_WORDS = re.compile(r"^[A-Za-z_/.-][A-Za-z0-9_./@:+=, -]*[A-Za-z0-9_./@+-]$")
_RESERVED = {"true", "false", "null", "yes", "no", "y", "n", "~"}


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if v is None:
        return "null"
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _RESERVED:
        return s
    plain_words = _WORDS.match(s) and ": " not in s and " #" not in s and not s.startswith("- ")
    return s if plain_words and s.lower() not in _RESERVED else json.dumps(s)


def _ordered(data: dict, model: type[BaseModel] | None) -> list[str]:
    order = list(model.model_fields) if model else []
    return [k for k in order if k in data] + sorted(k for k in data if k not in order)


def _submodel(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    if model is None or key not in model.model_fields:
        return None
    ann = model.model_fields[key].annotation
    for cand in getattr(ann, "__args__", (ann,)):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def _lines(data: dict, model: type[BaseModel] | None, indent: str) -> list[str]:
    out = []
    for name in _ordered(data, model):
        v, key = data[name], _scalar(str(name))  # a key like "[x]" must stay a string
        if isinstance(v, dict) and v:
            out.append(f"{indent}{key}:")
            out.extend(_lines(v, _submodel(model, name), indent + "  "))
        elif isinstance(v, dict):
            out.append(f"{indent}{key}: {{}}")
        elif isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            out.append(f"{indent}{key}:")  # a launch line: one argument per line
            out.extend(f"{indent}  - {_scalar(x)}" for x in v)
        elif isinstance(v, list):
            out.append(f"{indent}{key}: [{', '.join(_scalar(x) for x in v)}]")
        else:
            out.append(f"{indent}{key}: {_scalar(v)}")
    return out


def to_yaml(data: dict, header: str = "") -> str:
    """YAML 1.2 text of spec data, keys in schema order; `header` becomes comment lines."""
    head = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return head + "\n".join(_lines(data, Spec, "")) + "\n"


def reload(data: dict, origin: str = "<generated spec>") -> Spec:
    """Validate spec data exactly as a file would be (types and cross-checks): SpecError.
    Diagnostics name `origin`, never a temporary file."""
    return load_spec_text(to_yaml(data), origin)


def spec_data(spec: Spec) -> dict:
    """What the spec's author wrote (defaults left out), as plain JSON-able data."""
    return spec.model_dump(mode="json", exclude_unset=True)
