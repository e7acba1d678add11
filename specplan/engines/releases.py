"""The engine releases specplan models, oldest first: the one home of every release number.

Each release's launch flags are read from that release's own wheel (flags/<engine>.json for the
newest, flags/<engine>-<version>.json for the differences of an older one; see flag_table.py).
A spec names its release with `engine_version` (default: the newest); `check(engine, version)`
is what every command asks before reading one.
"""

from __future__ import annotations

RELEASES: dict[str, tuple[str, ...]] = {
    "sglang": ("0.5.20", "0.5.21", "0.5.22", "0.5.23"),
    "vllm": ("0.30.0", "0.31.0", "0.32.0", "0.33.0"),
}
NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


class UnknownRelease(ValueError):
    """A release outside RELEASES; the message lists the supported ones."""


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


def newest_first(engine: str) -> tuple[str, ...]:
    return tuple(reversed(RELEASES[engine]))
