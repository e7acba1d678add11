"""One convention object per engine release: everything that differs between SGLang and vLLM,
and between the releases of each. Each engine is a package, engines/<engine>/, holding all of
it (its releases, layout, refusals, flag and hook tables, launch-line tables, defaults, KV
handoff rules); base.py, handoff.py, launch.py and flag_table.py hold what they share.

`convention(spec.engine, spec.engine_version)` is the one place an engine is selected; the
rest of specplan asks the object (base.Convention lists the questions) and never compares
engine names or release numbers.
"""

from __future__ import annotations

from functools import cache

from specplan.engines.base import Choices, Convention, DpAgreement, MoeLayout, Spec, Violation
from specplan.engines.releases import RELEASES, check, newest
from specplan.engines.sglang.convention import SGLang
from specplan.engines.vllm.convention import VLLM
from specplan.mesh.mesh import Mesh
from specplan.mesh.pipeline import build_stages


_CLASSES: dict[str, type[Convention]] = {c.name: c for c in (SGLang, VLLM)}


@cache
def convention(engine: str, version: str | None = None) -> Convention:
    """The convention of `engine` at release `version` (None: the newest); UnknownRelease
    (releases.py) for a release outside the table."""
    return _CLASSES[engine](check(engine, version))


def of(spec: Spec) -> Convention:
    """The convention the spec names: its engine at its engine_version."""
    return convention(spec.engine, spec.engine_version)


def build_mesh(spec: Spec) -> Mesh:
    """The spec's Mesh: its engine's layout (families, widths, PP split) over its topology."""
    t, conv = spec.topology, of(spec)
    moe = spec.model.moe
    fams = conv.families(t, is_moe=moe is not None, eplb=moe is not None and moe.eplb)
    world, worlds = conv.world_size(t), conv.num_worlds(t)
    parts = spec.model.pp_partition or conv.split_layers(spec.model.num_layers, t.pp)
    stages = build_stages(list(parts), spec.speculative.taps(spec.model.num_layers))
    return Mesh(spec.engine, world, worlds, conv.widths(t), conv.derived(t), fams, stages,
                world * worlds // t.nodes, conv.extra_coords(t))


def shown_version(spec: Spec) -> str | None:
    """The spec's release when reports print it: only when it is not the newest (a spec that
    does not name a release, or names the newest, reads as before releases were tables)."""
    conv = of(spec)
    return None if conv.newest else conv.version


def __getattr__(name: str) -> dict[str, Convention]:
    if name == "ENGINES":  # the newest release of each engine
        return {engine: convention(engine) for engine in RELEASES}
    raise AttributeError(name)

__all__ = ["ENGINES", "RELEASES", "Choices", "Convention", "DpAgreement", "MoeLayout", "Violation",
           "build_mesh", "convention", "newest", "of", "shown_version"]
