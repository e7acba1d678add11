"""The spec's JSON Schema (for editors: `specplan schema`, docs/spec.schema.json) and the
Markdown YAML reference the README carries, both generated from the pydantic models.

Regenerate the committed copies after changing schema/model.py:

    python -m specplan.schema.reference --write
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from specplan.schema import model as spec_model

SCHEMA_ID = "urn:specplan:spec-schema"
START, END = "<!-- yaml-reference:start -->", "<!-- yaml-reference:end -->"
ROOT = Path(__file__).resolve().parents[2]
JsonDict = dict[str, Any]  # a JSON Schema object, as pydantic writes it


def json_schema() -> JsonDict:
    """Spec.model_json_schema() with an id, a title, and the defaults pydantic leaves out
    (sections built by default_factory), and a description on every section."""
    schema = spec_model.Spec.model_json_schema()
    _fill(schema, spec_model.Spec, schema)
    for name, sub in schema["$defs"].items():
        _fill(sub, getattr(spec_model, name), schema)
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "specplan topology spec"}
    schema.pop("title", None)
    return {**head, **schema}


def _fill(node: JsonDict, cls: type[BaseModel], root: JsonDict) -> None:
    for name, field in cls.model_fields.items():
        prop = node["properties"][name]
        if field.default_factory is not None:
            value = field.get_default(call_default_factory=True)
            prop["default"] = {} if isinstance(value, BaseModel) else value
        if "description" not in prop:
            prop["description"] = field.description or _ref_description(prop, root)


def _ref_description(prop: JsonDict, root: JsonDict) -> str:
    ref = prop.get("$ref") or next((a["$ref"] for a in prop.get("anyOf", []) if "$ref" in a), None)
    return root["$defs"][ref.rsplit("/", 1)[1]].get("description", "") if ref else ""


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


# -- the Markdown reference -----------------------------------------------------------------

def reference_markdown(schema: JsonDict | None = None) -> str:
    """One table row per key: dotted path, type or choices, default, description."""
    schema = schema or json_schema()
    rows = ["| key | type | default | description |", "|---|---|---|---|"]
    rows += _rows(schema, schema, "")
    return "\n".join(rows) + "\n"


def _rows(node: JsonDict, root: JsonDict, prefix: str) -> list[str]:
    out = []
    required = set(node.get("required", ()))
    for name, prop in node["properties"].items():
        path = f"{prefix}{name}"
        sub = _section(prop, root)
        default = "required" if name in required else _default(prop)
        out.append(f"| `{path}` | {_cell(_type(prop, root))} | {_cell(default)} | "
                   f"{_cell(prop.get('description', ''))} |")
        if sub is not None:
            out += _rows(sub, root, f"{path}.")
    return out


def _section(prop: JsonDict, root: JsonDict) -> JsonDict | None:
    """The nested model a property holds (directly or as `X | null`), else None."""
    refs = [prop] + prop.get("anyOf", [])
    for r in refs:
        if "$ref" in r:
            section: JsonDict = root["$defs"][r["$ref"].rsplit("/", 1)[1]]
            return section
    return None


def _type(prop: JsonDict, root: JsonDict) -> str:
    if "anyOf" in prop:
        return " or ".join(_type(p, root) for p in prop["anyOf"])
    if "$ref" in prop:
        return "section"
    if "enum" in prop:
        return " | ".join(f"`{v}`" for v in prop["enum"])
    kind: str = prop.get("type", "any")
    if kind == "array":
        most = f", at most {prop['maxItems']:,} items" if "maxItems" in prop else ""
        return f"list of {_type(prop['items'], root)}{most}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of name to {_type(prop['additionalProperties'], root)}"
    bounds = [f">= {prop['minimum']}"] if "minimum" in prop else []
    bounds += [f"> {prop['exclusiveMinimum']}"] if "exclusiveMinimum" in prop else []
    bounds += [f"<= {prop['maximum']:,}"] if "maximum" in prop else []
    bounds += [f"at most {prop['maxLength']} characters"] if "maxLength" in prop else []
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(prop: JsonDict) -> str:
    if "default" not in prop:
        return "-"
    return f"`{json.dumps(prop['default'])}`"


def _cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|").replace("<", "&lt;")


def readme_section() -> str:
    return f"{START}\n{reference_markdown()}{END}"


def sync_readme(path: Path, write: bool) -> bool:
    """Whether `path`'s reference section is current; with write, make it so."""
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{path}: no {START} ... {END} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = head + readme_section() + tail
    if write and new != text:
        path.write_text(new, encoding="utf-8")
    return new == text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate docs/spec.schema.json and the "
                                                 "README YAML reference from schema/model.py.")
    parser.add_argument("--write", action="store_true", help="rewrite the files (else only check)")
    parser.add_argument("--readme", default=str(ROOT / "README.md"))
    parser.add_argument("--schema", default=str(ROOT / "docs" / "spec.schema.json"))
    args = parser.parse_args(argv)
    schema_path = Path(args.schema)
    fresh = schema_path.exists() and schema_path.read_text(encoding="utf-8") == schema_text()
    if args.write and not fresh:
        schema_path.parent.mkdir(parents=True, exist_ok=True)
        schema_path.write_text(schema_text(), encoding="utf-8")
    readme_ok = sync_readme(Path(args.readme), args.write)
    if args.write:
        return 0
    for ok, path in ((fresh, schema_path), (readme_ok, args.readme)):
        if not ok:
            print(f"{path} is out of date: python -m specplan.schema.reference --write", file=sys.stderr)
    return 0 if fresh and readme_ok else 1


if __name__ == "__main__":
    sys.exit(main())
