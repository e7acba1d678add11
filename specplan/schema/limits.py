"""Limits across keys, so nothing past the loader meets a size it cannot hold: the world of
ranks, experts per token, and strings that become paths or command lines.

Per-key limits live on the fields (schema/model.py, shown in the JSON Schema); these are the
ones a single field cannot state.
"""

from __future__ import annotations

from specplan.errors import Diagnostic
from specplan.schema.model import MAX_RANKS, Spec
from specplan.schema.yaml_source import YamlSource

PATH_KEYS = (("model", "path"), ("speculative", "draft_path"), ("runtime", "trace_dir"))


def limit_checks(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    return _world(spec, src) + _experts(spec, src) + _paths(spec, src)


def _world(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    from specplan.engines import convention  # the engines' package reads schema types

    engine = convention(spec.engine)
    world = engine.world_size(spec.topology) * engine.num_worlds(spec.topology)
    if world <= MAX_RANKS:
        return []
    return [src.diag(("topology",), f"the world holds {world:,} ranks, beyond specplan's limit of "
                                    f"{MAX_RANKS:,} ranks; expected a smaller topology")]


def _experts(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    moe = spec.model.moe
    if moe is None or moe.top_k <= moe.num_experts:
        return []
    return [src.diag(("model", "moe", "top_k"), f"top_k={moe.top_k} routes each token to more "
                                                f"experts than the model has (num_experts={moe.num_experts}); "
                                                "expected top_k <= num_experts")]


def _paths(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    out = []
    for section, key in PATH_KEYS:
        value = getattr(getattr(spec, section), key)
        if value is not None and any(ord(c) < 32 for c in value):
            out.append(src.diag((section, key), f"the path holds a control character (NUL, newline, "
                                                f"...): {value!r}; expected a plain path"))
    return out
