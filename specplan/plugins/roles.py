"""Which hook body serves which role of an engine's hook table (engines/hooks.py).

A body declares it beside its code: `@serves("accept")`, or `@serves("pp_receive",
"(self, input_batch)")` for a body written for one release's signature of that function; one
body may serve several roles (SGLang's two worker forwards). `body_for(cls, hook)` is the
method of `cls` that serves a table's hook: the one written for its signature, else the one
written for any; a wrapped hook with none is an UnservedHook naming the role, the function and
its signature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from specplan.engines.hooks import Hook

ATTR = "__specplan_serves__"


def serves(role: str, signature: str | None = None) -> Callable:
    """Mark a hook body as serving `role` (at `signature` only, when given)."""

    def mark(body: Callable) -> Callable:
        setattr(body, ATTR, getattr(body, ATTR, ()) + ((role, signature),))
        return body

    return mark


def declared(cls: type) -> Iterator[tuple[str, str | None, str]]:
    """(role, signature or None, method name) of every body `cls` declares."""
    for name in dir(cls):
        for role, signature in getattr(getattr(cls, name, None), ATTR, ()):
            yield role, signature, name


class UnservedHook(LookupError):
    pass


def body_for(cls: type, hook: Hook) -> str | None:
    """The name of the method of `cls` serving `hook` (None: the hook is only called)."""
    if not hook.wrapped:
        return None
    exact = [n for r, s, n in declared(cls) if r == hook.role and s == hook.signature]
    loose = [n for r, s, n in declared(cls) if r == hook.role and s is None]
    found = exact or loose
    if len(found) != 1:
        raise UnservedHook(f"{cls.__name__} has {len(found)} bodies for role {hook.role!r} "
                           f"({hook.target}{hook.signature}); expected one")
    return found[0]
