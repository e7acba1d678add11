"""One shape for both engines' hook tables: a release's functions the plugin hooks or calls,
each by its role.

A `Hook` names what the plugin does there (its role: `accept`, `pp_receive`, `world`, ...), the
engine function (module, then its qualified name inside it) and the signature that release's
wheel has for it (vLLM: `inspect.signature` with annotations dropped; SGLang: the parameter
names of its definition). A `HookTable` is one release's hooks; the plugin asks it by role
(`table.hook("accept")`), never by the function's name, so a release that renames a function
is one changed line of its table, and a role the table lacks is an UnknownRole naming the
release and the roles it has. The plugin's hook bodies declare the role (and, where a release
changed the signature, the signature) they serve beside their code (plugins/roles.py `serves`);
tests/engines/test_hook_tables.py checks, without a wheel, that every role a table wraps has
exactly one body, and under `engines` that every entry is the wheel's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TypeVar


@dataclass(frozen=True)
class Hook:
    """One engine function the plugin depends on, by its role."""

    role: str
    module: str
    qualname: str
    signature: str
    wrapped: bool = True  # False: the plugin only calls or builds it (checked all the same)

    @property
    def target(self) -> str:
        return f"{self.module}.{self.qualname}"


class UnknownRole(KeyError):
    """A role the release's table does not have: the message names the release and its roles."""

    def __str__(self) -> str:
        return str(self.args[0])


T = TypeVar("T", bound="HookTable")


@dataclass(frozen=True)
class HookTable:
    """One release's hooks, by role (`version` "0.33.0", or "0.32.x" for a release line)."""

    engine: str
    version: str
    hooks: tuple[Hook, ...]

    def hook(self, role: str) -> Hook:
        for h in self.hooks:
            if h.role == role:
                return h
        raise UnknownRole(f"{self.engine} {self.version}: the plugin's hook table has no role "
                          f"{role!r}; it has {', '.join(self.roles())}")

    def target(self, role: str) -> str:
        return self.hook(role).target

    def roles(self) -> tuple[str, ...]:
        return tuple(h.role for h in self.hooks)

    def differs(self: T, version: str, changed: Mapping[str, Hook | str | None]) -> T:
        """This table at `version`: each role of `changed` replaced by its Hook, its signature
        (a str: the same function, another signature) or None (the release has no such
        function); a subclass's other fields stay (`dataclasses.replace` them after)."""
        hooks = []
        for h in self.hooks:
            new = changed.get(h.role, h)
            if isinstance(new, str):
                new = replace(h, signature=new)
            if new is not None:
                hooks.append(new)
        return replace(self, version=version, hooks=tuple(hooks))
