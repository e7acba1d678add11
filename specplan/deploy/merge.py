"""One instance's spec document, merged from its own YAML and a deployment's shared keys.

Every value keeps the file, line and column it was written at, so an error in an inherited
`model.num_layers` points at the deployment file and one in the instance's own topology at
the instance's file. An instance may repeat a shared key only with the same value.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from specplan.errors import Diagnostic
from specplan.schema.yaml_source import PathKey, YamlSource, dotted, kind_of

SHARED = ("engine", "behaviour", "model", "speculative", "sync", "pipeline", "runtime")


@dataclass
class MergedSource(YamlSource):
    """A YamlSource whose paths may come from several files."""

    files: dict[PathKey, str] = field(default_factory=dict)

    def file_of(self, path: PathKey) -> str:
        for n in range(len(path), -1, -1):
            if path[:n] in self.files:
                return self.files[path[:n]]
        return self.file


def rooted(source: YamlSource, root: PathKey) -> MergedSource:
    """The part of `source` under `root`, as a document of its own (an inline instance body)."""
    out = MergedSource(source.file, _at(source.data, root))
    n = len(root)
    for table, into in ((source.value_at, out.value_at), (source.key_at, out.key_at)):
        for path, loc in table.items():
            if path[:n] == root:
                into[path[n:]] = loc
    out.problems = [d for d in source.problems if d.path.startswith(dotted(root))]
    return out


def _at(data: Any, root: PathKey) -> Any:
    for part in root:
        data = data[part]
    return data


def whole(source: YamlSource) -> MergedSource:
    """A one-file source as a MergedSource."""
    return MergedSource(source.file, source.data, dict(source.value_at), dict(source.key_at),
                        list(source.problems), set(source.problem_paths))


def inherit(instance: MergedSource, shared: YamlSource, shared_file: str) -> list[Diagnostic]:
    """Fill `instance` with the shared keys it does not write; a contradiction is an error."""
    problems: list[Diagnostic] = []
    for key in SHARED:
        if key in shared.data:
            _merge(instance, shared, (key,), shared_file, problems)
    return problems


def _merge(inst: MergedSource, shared: YamlSource, path: PathKey, shared_file: str,
           problems: list[Diagnostic]) -> None:
    mine, theirs = _get(inst.data, path), _at(shared.data, path)
    if mine is _MISSING:
        _put(inst.data, path, copy.deepcopy(theirs))
        _copy_locations(inst, shared, path, shared_file)
        return
    if isinstance(mine, dict) and isinstance(theirs, dict):
        for key in theirs:
            _merge(inst, shared, path + (key,), shared_file, problems)
        return
    if mine == theirs:
        return
    line, col = shared.loc(path) or (None, None)
    where = f"{shared_file}:{line}:{col}" if line else shared_file
    problems.append(inst.diag(path, f"{kind_of(mine)} contradicts the deployment's shared "
                                    f"{dotted(path)}: {kind_of(theirs)} ({where}); an instance "
                                    "may repeat a shared key only with the same value"))


_MISSING = object()


def _get(data: Any, path: PathKey) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return _MISSING
        data = data[part]
    return data


def _put(data: dict, path: PathKey, value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def _copy_locations(inst: MergedSource, shared: YamlSource, path: PathKey, shared_file: str) -> None:
    n = len(path)
    for table, into in ((shared.value_at, inst.value_at), (shared.key_at, inst.key_at)):
        for p, loc in table.items():
            if p[:n] == path:
                into[p] = loc
    inst.files[path] = shared_file
