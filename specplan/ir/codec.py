"""JSON <-> frozen dataclasses, driven by the dataclasses' own type hints.

One reader for every object of the plan: each field's annotation says what its JSON value must
be (int, float, str, bool, a `Literal`, a nested dataclass, `tuple[X, ...]` for an array,
`tuple[A, B, C]` for a fixed triple, `Mapping[str, X]` for an object with free keys, `X | None`
for null), `Annotated[int, Min(n)]` a lower bound. A key the JSON may leave out has the default
`ABSENT` (distinct from null) and is left out again on the way back. Every problem is collected
with its dotted path (`boundaries[2].layout.fields[0].offset`), so a bad file is reported whole.
Field order is the JSON key order, so `encode(decode(x)) == x` key for key.
It sits in ir/ beside the draft because the plan's leaf objects (ir/records.py) are both what
the passes draft and what the plan holds; plan/codec.py names it for the plan's side.
The planner's draft (specplan/ir/draft.py) is read the same way: a draft object's attributes
as an object's keys (its ABSENT ones left out), a tuple as an array; plan/build.py hands the
passes' draft to this reader, so a planner bug that drafts a malformed plan fails here.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Final, Literal, Self, TypeVar, Union


class Absent(enum.Enum):
    """A value not given: a key plan.json leaves out (null is None), or one no pass filled yet.
    Its one member is `ABSENT`; a field that may lack its key is typed `X | Absent`, and
    `x is not ABSENT` (or `if x:`, since ABSENT is false) narrows it to `X`."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"

    __str__ = __repr__  # printed as it always was, not "Absent.ABSENT"

    def __bool__(self) -> Literal[False]:
        return False


ABSENT: Final = Absent.ABSENT


T = TypeVar("T")


def given(value: T | Absent) -> T:
    """`value`, whose key the plan (or a pass contract) guarantees here: a p2p op's peer, a
    draft fact a pass before this one filled. An ABSENT one is a bug in specplan."""
    assert value is not ABSENT, "a key that must be given here is absent"
    return value


def opt(value: T | Absent) -> T | None:
    """None for a key the JSON left out, else the value (for keys that may be absent or null)."""
    return None if value is ABSENT else value


@dataclasses.dataclass(frozen=True)
class Min:
    """`Annotated[int, Min(1)]`: the smallest value the field takes."""

    value: int


Problems = list[tuple[str, str]]  # (dotted path, message)


class Problem(Exception):
    """Every (dotted path, message) found while decoding one document."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p}: {m}" for p, m in problems))


@typing.dataclass_transform(frozen_default=True)
class JsonObject:
    """Base of every plan object: each subclass is a frozen dataclass (made so here, as
    msgspec's Struct and pydantic's BaseModel make theirs; mypy reads the fields through
    `dataclass_transform`), and reads like the read-only JSON mapping it came from, so code
    that still indexes plan content by key keeps working while it migrates to attributes."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(frozen=True)(cls)

    def __getitem__(self, key: str) -> Any:
        if key not in _keys(type(self)) or getattr(self, key) is ABSENT:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in _keys(type(self)) and getattr(self, key) is not ABSENT

    def keys(self) -> list[str]:
        return [k for k in _keys(type(self)) if getattr(self, k) is not ABSENT]

    def values(self) -> list[Any]:
        return [getattr(self, k) for k in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, getattr(self, k)) for k in self.keys()]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as its JSON (MappingProxyType fields do not pickle), read back by `decode`.
        return decode, (type(self), encode(self))

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self  # frozen all the way down: a copy would be equal and immutable


_KEYS: dict[type, tuple[str, ...]] = {}


def _keys(cls: type) -> tuple[str, ...]:
    """The field names of dataclass `cls`, in order (read once per class)."""
    keys = _KEYS.get(cls)
    if keys is None:
        keys = _KEYS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return keys


def decode(cls: type[T], data: Any, path: str = "") -> T:
    """`data` (parsed JSON) as an instance of dataclass `cls`; raises Problem naming every bad key."""
    problems: list[tuple[str, str]] = []
    value = _decode(cls, data, path, problems)
    if problems:
        raise Problem(problems)
    return value


def encode(obj: Any) -> Any:
    """The JSON value of a decoded object (ABSENT keys left out, tuples as lists)."""
    if dataclasses.is_dataclass(obj):
        return {f.name: encode(v) for f in dataclasses.fields(obj)
                if (v := getattr(obj, f.name)) is not ABSENT}
    if isinstance(obj, Mapping):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return [encode(v) for v in obj]
    return obj


def _decode(tp: Any, data: Any, path: str, problems: Problems) -> Any:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *meta = typing.get_args(tp)
        value = _decode(base, data, path, problems)
        for m in meta:
            if isinstance(m, Min) and isinstance(value, (int, float)) and value < m.value:
                problems.append((path, f"must be >= {m.value}, found {value!r}"))
        return value
    if origin in (Union, types.UnionType):
        return _union(tp, data, path, problems)
    if origin is Literal:
        choices = typing.get_args(tp)
        if data not in choices or isinstance(data, bool) != isinstance(choices[0], bool):
            problems.append((path, f"expected one of {list(choices)}, found {data!r}"))
        return data
    if origin is tuple:
        return _tuple(tp, data, path, problems)
    if origin in (Mapping, dict):
        return _mapping(tp, data, path, problems)
    if dataclasses.is_dataclass(tp):
        return _object(tp, data, path, problems)
    return _scalar(tp, data, path, problems)


def _scalar(tp: Any, data: Any, path: str, problems: Problems) -> Any:
    if tp is float:
        ok = isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data)
        what = "a finite number"
    elif tp is int:
        ok, what = isinstance(data, int) and not isinstance(data, bool), "an integer"
    else:
        ok, what = isinstance(data, tp), {str: "a string", bool: "true or false"}.get(tp, tp.__name__)
    if not ok:
        problems.append((path, f"expected {what}, found {_show(data)}"))
    return data


def _union(tp: Any, data: Any, path: str, problems: Problems) -> Any:
    args = [a for a in typing.get_args(tp) if a is not Absent]
    if data is None and type(None) in args:
        return None
    rest = [a for a in args if a is not type(None)]
    for i, arg in enumerate(rest):
        trial: Problems = []
        value = _decode(arg, data, path, trial)
        if not trial or i == len(rest) - 1:
            problems.extend(trial)
            return value
    return data


def _tuple(tp: Any, data: Any, path: str, problems: Problems) -> Any:
    args = typing.get_args(tp)
    if not isinstance(data, (list, tuple)):
        problems.append((path, f"expected an array, found {_show(data)}"))
        return ()
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], v, f"{path}[{i}]", problems) for i, v in enumerate(data))
    if len(data) != len(args):
        problems.append((path, f"expected {len(args)} items, found {len(data)}"))
        return tuple(data)
    return tuple(_decode(a, v, f"{path}[{i}]", problems) for i, (a, v) in enumerate(zip(args, data)))


def _mapping(tp: Any, data: Any, path: str, problems: Problems) -> Any:
    _, value_tp = typing.get_args(tp)
    if not isinstance(data, dict):
        problems.append((path, f"expected an object, found {_show(data)}"))
        return types.MappingProxyType({})
    out = {k: _decode(value_tp, v, _join(path, k), problems) for k, v in data.items()}
    return types.MappingProxyType(out)


def _object(cls: Any, data: Any, path: str, problems: Problems) -> Any:
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = _attributes(data)
    if not isinstance(data, dict):
        problems.append((path, f"expected an object, found {_show(data)}"))
        return None
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            if f.default is ABSENT:
                values[f.name] = ABSENT
                continue
            problems.append((_join(path, f.name), "missing key"))
            values[f.name] = None
            continue
        values[f.name] = _decode(hints[f.name], data[f.name], _join(path, f.name), problems)
    for key in data:
        if key not in values:
            problems.append((_join(path, str(key)), f"unknown key (keys: {', '.join(values)})"))
    return cls(**values)


def _attributes(obj: Any) -> dict[str, Any]:
    """A draft (or plan) object as the JSON object it stands for: its attributes but ABSENT ones."""
    return {f.name: v for f in dataclasses.fields(obj) if (v := getattr(obj, f.name)) is not ABSENT}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _show(data: object) -> str:
    if data is None:
        return "null"
    kind = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(type(data))
    text = repr(data)
    return f"{kind} {text}" if kind and len(text) <= 40 else kind or text
