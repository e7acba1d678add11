"""Loading a deployment: a prefill and a decode instance, and the connector between them.

Three ways in, one InstancePair out:
- a deployment file: `instances: {prefill: PATH_OR_BODY, decode: PATH_OR_BODY}` plus shared
  keys (merge.SHARED) each instance inherits and may not contradict, and `connector`;
- a spec with `disaggregation: {role, peer, connector}` (peer relative to that file);
- two instance specs given side by side (`specplan check A.yaml B.yaml`).
Every error names its file, line and column, in whichever file it is.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from specplan.deploy.merge import SHARED, MergedSource, inherit, rooted, whole
from specplan.deploy.pairing import Instance, pair
from specplan.errors import Diagnostic, SpecError
from specplan.io.files import not_readable
from specplan.schema import Spec
from specplan.schema.load import spec_from_source
from specplan.schema.yaml_source import YamlSource, kind_of, read_source

TOP_KEYS = ("name", "instances", "connector", *SHARED)
ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class InstancePair:
    """A disaggregated deployment as loaded: the prefill and the decode instance, the connector
    between them, and the file that named them. (The Python API wraps it as specplan.Deployment.)"""

    name: str
    file: str
    prefill: Instance
    decode: Instance
    connector: str

    @property
    def instances(self) -> tuple[Instance, Instance]:
        return (self.prefill, self.decode)


def is_deployment(data: object) -> bool:
    """A deployment file (`instances`) or an instance spec (`disaggregation`); a key written as
    null is absent, as the schema reads it (`disaggregation: null` is a plain spec)."""
    return isinstance(data, dict) and ("instances" in data or data.get("disaggregation") is not None)


def load_target(path: str) -> Spec | InstancePair:
    """A plain spec, or the deployment a deployment file or a spec with a peer describes.

    An instance spec without a peer (a role and a connector only, as `specplan import` writes
    it) is planned alone."""
    source = read_source(path)
    if not is_deployment(source.data):
        return spec_from_source(source)
    if "instances" in source.data:
        return _from_file(source)
    spec = spec_from_source(source)
    if spec.disaggregation is None or spec.disaggregation.peer is None:
        return spec
    return _from_peer(spec, spec.disaggregation.peer, source)


def load_pair(first: str, second: str) -> InstancePair:
    """Two instance specs checked against each other."""
    if Path(first).resolve() == Path(second).resolve():
        raise SpecError([Diagnostic(second, None, None, "", f"is {first} again; expected the "
                                    "other instance's spec")])
    a, b = (spec_from_source(read_source(p)) for p in (first, second))
    prefill, decode, connector = pair(a, b, first)
    return InstancePair(f"{prefill.spec.name}+{decode.spec.name}", first, prefill, decode, connector)


def _from_peer(spec: Spec, peer: str, source: YamlSource) -> InstancePair:
    target = _resolve(source, ("disaggregation", "peer"), peer, Path(source.file).parent)
    other = spec_from_source(read_source(target))
    prefill, decode, connector = pair(spec, other, source.file)
    return InstancePair(f"{prefill.spec.name}+{decode.spec.name}", source.file, prefill, decode,
                      connector)


def _resolve(source: YamlSource, at: tuple, value: str, base: Path) -> str:
    """An instance path, relative to `base`; missing, a directory or this file: exit 2."""
    path = base / value
    shown = repr(value) if str(path) == value else f"{value!r} (resolved to {path})"
    why = not_readable(path)
    if why == "no such file":
        raise SpecError([source.diag(at, f"{shown}: no such file; expected an instance's "
                                         "spec")])
    if why == "is a directory":
        raise SpecError([source.diag(at, f"{shown} is a directory; expected an "
                                         "instance's spec file")])
    if why is not None:
        raise SpecError([source.diag(at, f"{shown}: {why}; expected an instance's spec file")])
    if path.resolve() == Path(source.file).resolve():
        raise SpecError([source.diag(at, f"{shown} points back to this file; expected "
                                         "the other instance's spec")])
    return str(path)


def _from_file(source: YamlSource) -> InstancePair:
    data = source.data
    problems = list(source.problems) + _top_key_problems(source)
    bodies = data.get("instances")
    if not isinstance(bodies, dict):
        problems.append(source.diag(("instances",), "expected a mapping {prefill: PATH_OR_BODY, "
                                    f"decode: PATH_OR_BODY}}, found {kind_of(bodies)}"))
        raise SpecError(problems)
    problems += _role_key_problems(source, bodies)
    connector = data.get("connector")
    if connector is not None and not isinstance(connector, str):
        problems.append(source.diag(("connector",), f"expected a string, found {kind_of(connector)}"))
    specs: list[Spec | None] = []
    for role in ROLES:  # every error of both instances at once
        try:
            specs.append(_instance_spec(source, role) if _body_ok(bodies, role) else None)
        except SpecError as exc:
            problems += exc.diagnostics
    if problems:
        raise SpecError(problems)
    a, b = specs
    assert a is not None and b is not None  # a missing body is a problem raised above
    prefill, decode, connector = pair(a, b, source.file, deployment=(source, connector))
    return InstancePair(_deployment_name(source), source.file, prefill, decode, connector)


def _deployment_name(source: YamlSource) -> str:
    name = source.data.get("name")
    return name if isinstance(name, str) else Path(source.file).stem


def _body_ok(bodies: dict, role: str) -> bool:
    return isinstance(bodies.get(role), (str, dict))


def _top_key_problems(source: YamlSource) -> list[Diagnostic]:
    out = []
    for key in source.data:
        if key in TOP_KEYS:
            continue
        close = difflib.get_close_matches(str(key), TOP_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f"; valid keys: {', '.join(TOP_KEYS)}"
        out.append(source.diag((key,), f"unknown deployment key {key!r}{hint}", key=True))
    return out


def _role_key_problems(source: YamlSource, bodies: dict) -> list[Diagnostic]:
    out = [source.diag(("instances", k), f"unknown instance {k!r}; expected prefill and decode",
                       key=True) for k in bodies if k not in ROLES]
    out += [source.diag(("instances",), f"missing required key {r!r}") for r in ROLES if r not in bodies]
    for role in ROLES:
        body = bodies.get(role)
        if role in bodies and not isinstance(body, (str, dict)):
            out.append(source.diag(("instances", role), "expected a spec path or a spec mapping, "
                                   f"found {kind_of(body)}"))
    return out


def _instance_spec(source: YamlSource, role: str) -> Spec:
    """The instance's own YAML, with the deployment's shared keys filled in."""
    body = source.data["instances"][role]
    if isinstance(body, dict):
        inst = rooted(source, ("instances", role))
        if "name" not in body:  # an inline instance is named after its deployment and role
            inst.data = {"name": f"{_deployment_name(source)}-{role}", **body}
            inst.value_at[("name",)] = source.loc(("instances", role)) or (None, None)  # type: ignore[assignment]  # no place: diagnostics print None
    else:
        path = _resolve(source, ("instances", role), body, Path(source.file).parent)
        inst = whole(read_source(path))
        inst.files[()] = inst.file
    problems = inherit(inst, source, source.file)
    if problems:
        raise SpecError(problems)
    return _spec(inst, role, source)


def _spec(inst: MergedSource, role: str, deployment: YamlSource) -> Spec:
    spec = spec_from_source(inst)
    dis = spec.disaggregation
    if dis is not None and dis.role != role:
        raise SpecError([inst.diag(("disaggregation", "role"), f"role {dis.role!r}, but the "
                                   f"deployment {deployment.file} lists this spec as its {role} "
                                   "instance")])
    return spec
