"""One convention object per engine release: everything that differs between SGLang and vLLM,
and between the releases of each (releases.py lists them).

`convention(spec.engine, spec.engine_version)` is the one place an engine is selected; the
rest of specplan asks the object (base.Convention lists the questions) and never compares
engine names or release numbers.
"""

from __future__ import annotations

from functools import cache

from specplan.engines.base import Convention, DpAgreement, MoeLayout, Violation
from specplan.engines.releases import RELEASES, check, newest


@cache
def convention(engine: str, version: str | None = None) -> Convention:
    """The convention of `engine` at release `version` (None: the newest); UnknownRelease
    (releases.py) for a release outside the table."""
    # imported here: the conventions read the schema, whose descriptions read releases.py
    from specplan.engines.sglang import SGLang
    from specplan.engines.vllm import VLLM

    return {"sglang": SGLang, "vllm": VLLM}[engine](check(engine, version))


def of(spec) -> Convention:
    """The convention the spec names: its engine at its engine_version."""
    return convention(spec.engine, spec.engine_version)


def shown_version(spec) -> str | None:
    """The spec's release when reports print it: only when it is not the newest (a spec that
    does not name a release, or names the newest, reads as before releases were tables)."""
    conv = of(spec)
    return None if conv.newest else conv.version


def __getattr__(name: str):
    if name == "ENGINES":  # the newest release of each engine
        return {engine: convention(engine) for engine in RELEASES}
    raise AttributeError(name)

__all__ = ["ENGINES", "RELEASES", "Convention", "DpAgreement", "MoeLayout", "Violation",
           "convention", "newest", "of", "shown_version"]
