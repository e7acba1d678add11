"""Pairing two instance specs: which is prefill, which is decode, and the connector between.

Bad pairings are bad input (exit 2), each naming the file, line and column of both sides:
two prefills or two decodes, connectors that disagree, and instances of different engines
without a connector both engines have.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines import of
from specplan.errors import Diagnostic, SpecError
from specplan.schema import Spec
from specplan.schema.model import Connector, Role
from specplan.schema.yaml_source import YamlSource

OTHER: dict[Role, Role] = {"prefill": "decode", "decode": "prefill"}


@dataclass(frozen=True)
class Instance:
    role: str
    spec: Spec

    @property
    def file(self) -> str:
        return self.spec.line_of()[0]


def pair(a: Spec, b: Spec, where: str, deployment: tuple[YamlSource, str | None] | None = None
         ) -> tuple[Instance, Instance, str]:
    """(prefill Instance, decode Instance, connector) of two specs; roles from their
    disaggregation keys, else from their order (a deployment file's slots, or A then B)."""
    role_a, role_b = _roles(a, b, ordered=deployment is not None)
    if role_a == role_b:
        raise SpecError([_diag(a, ("disaggregation", "role"), f"both instances are {role_a}: "
                               f"this spec and {_where(b, ('disaggregation', 'role'))}; expected "
                               "one prefill and one decode"),
                         _diag(b, ("disaggregation", "role"), f"both instances are {role_b}: "
                               f"this spec and {_where(a, ('disaggregation', 'role'))}")])
    prefill, decode = (a, b) if role_a == "prefill" else (b, a)
    connector = _connector(prefill, decode, deployment)
    return (Instance("prefill", _with_role(prefill, "prefill")),
            Instance("decode", _with_role(decode, "decode")), connector)


def _with_role(spec: Spec, role: Role) -> Spec:
    """The instance's spec with its role, so the planner plans that role's rounds only (an
    instance named by its slot in a deployment file, or by its order, may not write it)."""
    if spec.disaggregation is not None and spec.disaggregation.role == role:
        return spec
    from specplan.schema.model import Disaggregation

    return spec.model_copy(update={"disaggregation": Disaggregation(role=role)})


def _roles(a: Spec, b: Spec, ordered: bool) -> tuple[Role, Role]:
    ra = a.disaggregation.role if a.disaggregation else None
    rb = b.disaggregation.role if b.disaggregation else None
    if ordered:
        return ra or "prefill", rb or "decode"
    ra = ra or (OTHER[rb] if rb else "prefill")
    return ra, rb or OTHER[ra]


def _connector(prefill: Spec, decode: Spec,
               deployment: tuple[YamlSource, str | None] | None) -> str:
    named: list[tuple[Connector | str, str, Spec | None]] = [
        (s.disaggregation.connector, _where(s, ("disaggregation", "connector")), s)
        for s in (prefill, decode) if s.disaggregation and s.disaggregation.connector]
    source, value = deployment if deployment is not None else (None, None)
    if source is not None and value is not None:
        line, col = source.loc(("connector",)) or (None, None)
        named.insert(0, (value, f"{source.file}:{line}:{col}", None))
    values = {v for v, _, _ in named}
    if len(values) > 1:
        listing = ", ".join(f"{v} ({w})" for v, w, _ in named)
        raise SpecError([_place(named[0], f"the instances name different connectors: {listing}; "
                                          "expected one")])
    engines = (prefill.engine, decode.engine)
    if not values:
        if engines[0] != engines[1]:
            raise SpecError([_diag(decode, ("engine",), _mixed(prefill, decode, "no connector is set"))])
        return of(decode).default_connector
    connector = values.pop()
    both = _both(prefill, decode)
    if connector not in both:
        where = named[0]
        have = {s.engine: ", ".join(of(s).connectors) for s in (prefill, decode)}
        lacking = [s.engine for s in (prefill, decode) if connector not in of(s).connectors]
        lacking = list(dict.fromkeys(lacking))
        raise SpecError([_place(where, f"connector {connector!r} does not exist for "
                                       f"{' and '.join(lacking)} ({'; '.join(f'{e} has {h}' for e, h in have.items())}); "
                                       f"connectors for both: {', '.join(both) or 'none'}")])
    return connector


def _both(prefill: Spec, decode: Spec) -> list[str]:
    """The connectors both instances' engines have, in the prefill engine's order."""
    return [c for c in of(prefill).connectors if c in of(decode).connectors]


def _mixed(prefill: Spec, decode: Spec, why: str) -> str:
    both = _both(prefill, decode)
    return (f"the prefill instance runs {prefill.engine} and the decode instance {decode.engine}, and "
            f"{why}: set disaggregation.connector to one that exists for both: {', '.join(both)}")


def _place(named: tuple, message: str) -> Diagnostic:
    value, where, spec = named
    if spec is not None:
        return _diag(spec, ("disaggregation", "connector"), message)
    file, line, col = where.rsplit(":", 2)
    return Diagnostic(file, int(line) if line != "None" else None,
                      int(col) if col != "None" else None, "connector", message)


def _diag(spec: Spec, path: tuple, message: str) -> Diagnostic:
    return spec.yaml_source().diag(tuple(path), message)


def _where(spec: Spec, path: tuple) -> str:
    src = spec.yaml_source()
    line, col = src.loc(tuple(path)) or (None, None)
    file = src.file_of(tuple(path))
    return f"{file}:{line}:{col}" if line else file
