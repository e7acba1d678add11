"""The engine releases specplan models, oldest first, as each engine's package states them.

A release is written once, in its engine's package (engines/<engine>/__init__.py `RELEASES`);
this module only reads those tables. Each release's launch flags are read from that release's
own wheel (<engine>/flags/<engine>.json for the newest, <engine>/flags/<engine>-<version>.json
for the differences of an older one; see flag_table.py).
A spec names its release with `engine_version` (default: the newest); `check(engine, version)`
is what every command asks before reading one.
"""

from __future__ import annotations

from typing import Protocol

from specplan.engines import sglang, vllm


class Package(Protocol):
    """What an engine's package (engines/<engine>/__init__.py) states of its releases."""

    @property
    def NAME(self) -> str: ...  # the spec's `engine`
    @property
    def TITLE(self) -> str: ...  # as messages write it
    @property
    def RELEASES(self) -> tuple[str, ...]: ...  # oldest first


# every engine's package, in the order reports list the engines
PACKAGES: tuple[Package, ...] = (sglang, vllm)
RELEASES: dict[str, tuple[str, ...]] = {p.NAME: p.RELEASES for p in PACKAGES}
NAMES: dict[str, str] = {p.NAME: p.TITLE for p in PACKAGES}


class UnknownRelease(ValueError):
    """A release outside RELEASES; the message lists the supported ones."""


def version_key(version: str) -> tuple[int, ...]:
    """A release's number as a sortable tuple (any release, modelled or older: "0.9.2")."""
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def newest(engine: str) -> str:
    return RELEASES[engine][-1]


def check(engine: str, version: str | None) -> str:
    """`version` itself (the newest for None); UnknownRelease when it is not supported."""
    if version is None:
        return newest(engine)
    if version not in RELEASES[engine]:
        raise UnknownRelease(f"{NAMES[engine]} {version} is not a supported release; supported: "
                             f"{', '.join(RELEASES[engine])}")
    return version


def title(engine: str, version: str | None = None) -> str:
    """'SGLang 0.5.23': the engine and the release whose code a message cites."""
    return f"{NAMES[engine]} {version or newest(engine)}"


def at_least(engine: str, version: str | None, since: str) -> bool:
    """Whether `version` (the newest for None) is `since` or a later release of `engine`."""
    order = RELEASES[engine]
    return order.index(check(engine, version)) >= order.index(since)


def newest_first(engine: str) -> tuple[str, ...]:
    return tuple(reversed(RELEASES[engine]))
