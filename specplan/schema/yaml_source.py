"""Read YAML into plain values while remembering where every value came from.

YAML 1.2 core rules: only `true`/`false` are booleans, so `off`, `on`, `yes`, `no` stay
strings. Duplicate keys are errors, and tags that would build Python objects are refused
without ever being constructed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from specplan.errors import Diagnostic, SpecError
from specplan.io.files import not_readable, read_bounded

Loc = tuple[int, int]  # 1-based line, column
PathKey = tuple[Any, ...]

_INT = re.compile(r"^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$")  # 1.2 core: 010 is 10
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$")
_NULL = {"", "~", "null", "Null", "NULL"}
_STD = "tag:yaml.org,2002:"
_PLAIN = "!specplan/plain"  # an untagged plain scalar: resolved by the core schema below
_MAX_NODES = 100_000  # aliases may share nodes; refuse documents that expand past this
MAX_DEPTH = 32  # mappings and lists inside each other; a spec needs 4


@dataclass
class YamlSource:
    """A parsed document: its plain value and the location of every path in it."""

    file: str
    data: Any
    value_at: dict[PathKey, Loc] = field(default_factory=dict)
    key_at: dict[PathKey, Loc] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)  # refused tags, duplicate keys
    problem_paths: set[PathKey] = field(default_factory=set)

    def loc(self, path: PathKey, *, key: bool = False) -> Loc | None:
        """Nearest known location of `path`, walking up to its parents."""
        table = self.key_at if key else self.value_at
        for n in range(len(path), -1, -1):
            if path[:n] in table:
                return table[path[:n]]
            if key and path[:n] in self.value_at:
                return self.value_at[path[:n]]
        return None

    def diag(self, path: PathKey, message: str, *, key: bool = False) -> Diagnostic:
        line, col = self.loc(path, key=key) or (None, None)
        return Diagnostic(self.file_of(path), line, col, dotted(path), message)

    def file_of(self, path: PathKey) -> str:
        """The file `path` was written in (one file here; merged deployments differ)."""
        return self.file


def dotted(path: PathKey) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no type stubs
    """SafeLoader with YAML 1.2 core-schema scalars (we resolve scalars ourselves)."""


_Loader.yaml_implicit_resolvers = {}


def _resolve(self: _Loader, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
    # Mark untagged plain scalars so that an explicit `!!str 5` stays the string "5".
    if kind is yaml.ScalarNode and implicit[0]:
        return _PLAIN
    tag: str = yaml.SafeLoader.resolve(self, kind, value, implicit)
    return tag


_Loader.resolve = _resolve


def read_source(path: str | Path, text: str | None = None) -> YamlSource:
    """Parse `path` (or `text`, named `path`); raise SpecError for unreadable files and
    malformed YAML."""
    name = str(path)
    text = _read_text(Path(path), name) if text is None else text
    try:
        _check_depth(text, name)
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise SpecError([Diagnostic(name, line, col, "", f"malformed YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([Diagnostic(name, None, None, "", f"malformed YAML: {exc}")]) from None
    if root is None:
        raise SpecError([Diagnostic(name, None, None, "", "holds only comments and blank lines; "
                                                          "expected a YAML mapping")])
    source = YamlSource(name, None)
    errors: list[Diagnostic] = []
    try:
        source.data = _build(root, (), source, errors)
    except _Refused as exc:
        raise SpecError([exc.args[0]]) from None
    if not isinstance(source.data, dict):
        line, col = source.value_at[()]
        raise SpecError(errors + [Diagnostic(name, line, col, "", "expected a mapping at the top of the "
                                                                   f"document, found {kind_of(source.data)}")])
    # Not fatal: the schema still checks the rest, so every error of the file shows at once.
    source.problems = errors
    return source


def _check_depth(text: str, name: str) -> None:
    """One document, nested at most MAX_DEPTH deep, checked on the event stream before the
    (recursive) composer sees it: the parser is a state machine, so `[[[...` costs no stack."""
    depth, documents = 0, 0
    for event in yaml.parse(text, Loader=_Loader):
        mark = event.start_mark
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise SpecError([Diagnostic(name, mark.line + 1, mark.column + 1, "",
                                            "a second YAML document: one document expected "
                                            "(a spec is one mapping; remove the `---` and what follows)")])
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError([Diagnostic(name, mark.line + 1, mark.column + 1, "",
                                            f"the document nests deeper than {MAX_DEPTH} levels; "
                                            "a spec nests at most 4")])
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _read_text(path: Path, name: str) -> str:
    def fail(message: str) -> SpecError:
        return SpecError([Diagnostic(name, None, None, "", message)])

    if "\x00" in name:
        raise fail("the path holds a NUL character; expected the path of a topology YAML file")
    why = not_readable(path)
    if why == "is a directory":
        raise fail("is a directory; expected a YAML file")
    if why == "no such file":
        raise fail("no such file; expected the path of a topology YAML file")
    if why is not None:
        raise fail(f"{why}; expected a topology YAML file")
    try:
        raw = read_bounded(path)
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise fail(str(exc)) from None
    if b"\x00" in raw:
        raise fail("is a binary file; expected YAML text")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail("is not UTF-8 text; expected YAML") from None
    if not text.strip():
        raise fail("the file is empty; expected a YAML mapping")
    return text


class _Refused(Exception):
    """The document cannot be read into values at all (a cyclic or exploding alias)."""


def _build(node: yaml.Node, path: PathKey, src: YamlSource, errors: list[Diagnostic],
           active: frozenset[int] = frozenset()) -> Any:
    src.value_at[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if len(src.value_at) > _MAX_NODES:
        raise _Refused(src.diag(path, f"the document expands to more than {_MAX_NODES} values "
                                      "(aliases nested too deep); write the values out"))
    if isinstance(node, yaml.ScalarNode):
        return _scalar(node, path, src, errors)
    if len(path) >= MAX_DEPTH:  # aliases nest what the event stream showed flat
        raise _Refused(src.diag(path, f"the document nests deeper than {MAX_DEPTH} levels once "
                                      "its aliases are expanded; a spec nests at most 4"))
    if id(node) in active:
        raise _Refused(src.diag(path, "an alias refers to a node that contains it; "
                                      "recursive YAML structures are not supported"))
    active = active | {id(node)}
    if isinstance(node, yaml.MappingNode):
        return _build_mapping(node, path, src, errors, active)
    _check_tag(node, _STD + "seq", path, src, errors)
    return [_build(item, path + (i,), src, errors, active) for i, item in enumerate(node.value)]


def _build_mapping(node: yaml.MappingNode, path: PathKey, src: YamlSource, errors: list[Diagnostic],
                   active: frozenset[int]) -> dict[Any, Any]:
    _check_tag(node, _STD + "map", path, src, errors)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _STD + "merge" or (key_node.tag == _PLAIN and key_node.value == "<<"):
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            errors.append(Diagnostic(src.file, line, col, dotted(path),
                                     "YAML merge keys (<<) are not supported; write the keys out"))
            continue
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag not in (_PLAIN, _STD + "str"):
            line, col = key_node.start_mark.line + 1, key_node.start_mark.column + 1
            errors.append(Diagnostic(src.file, line, col, dotted(path),
                                     "mapping keys must be plain strings, found a "
                                     f"{'tagged ' if isinstance(key_node, yaml.ScalarNode) else ''}"
                                     f"{key_node.id} key"))
            continue
        key = key_node.value
        key_path = path + (key,)
        here = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        if key in out:
            first = src.key_at[key_path]
            errors.append(Diagnostic(src.file, here[0], here[1], dotted(key_path),
                                     f"duplicate key {key!r} (first given at line {first[0]})"))
            src.problem_paths.add(key_path)
            continue
        src.key_at[key_path] = here
        out[key] = _build(value_node, key_path, src, errors, active)
    return out


def _check_tag(node: yaml.Node, plain: str, path: PathKey, src: YamlSource, errors: list[Diagnostic]) -> bool:
    if node.tag in (plain, "!") or node.tag is None:
        return True
    tag = "!!" + node.tag[len(_STD):] if node.tag.startswith(_STD) else node.tag
    errors.append(src.diag(path, f"YAML tag {tag!r} is not allowed (it would build a Python object "
                                 "or a non-plain type); specplan reads plain YAML values only"))
    src.problem_paths.add(path)
    return False


def _scalar(node: yaml.ScalarNode, path: PathKey, src: YamlSource, errors: list[Diagnostic]) -> Any:
    value = node.value
    if node.tag in (_STD + "str", "!") or (node.tag == _PLAIN and node.style is not None):
        return value  # quoted, block or !!str-tagged scalars are strings
    if node.tag not in (_PLAIN, _STD + "int", _STD + "float", _STD + "bool", _STD + "null"):
        _check_tag(node, _STD + "str", path, src, errors)
        return None
    try:
        out = _core_scalar(value)
    except ValueError:  # an integer past Python's 4300-digit conversion limit
        errors.append(src.diag(path, f"an integer of {len(value)} digits is far beyond every "
                                     "limit; expected a size"))
        src.problem_paths.add(path)
        return None
    if node.tag == _STD + "float" and type(out) is int:
        return float(out)  # `!!float 2` is the float 2.0
    return out


def _core_scalar(value: str) -> Any:
    """A plain scalar under the YAML 1.2 core schema."""
    if value in ("true", "false"):
        return value == "true"
    if value in _NULL:
        return None
    if _INT.match(value):
        return int(value, 0) if value[:2] in ("0o", "0x") else int(value)
    if _FLOAT.match(value):
        if value.lstrip("+-").lower() in (".inf", ".nan"):
            return float(value.replace(".", "", 1))
        return float(value)
    return value


def kind_of(value: Any) -> str:
    """How a value reads in an error message: the YAML type and the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        if value.bit_length() <= 128:
            return f"integer {value}"
        return f"an integer of {int(value.bit_length() * 0.30103) + 1} digits"  # str() stops at 4300
    if isinstance(value, float):
        return f"float {value!r}"
    if isinstance(value, str):
        return f"string {value!r}" if len(value) <= 80 else \
            f"string {value[:40]!r}... ({len(value):,} characters)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
