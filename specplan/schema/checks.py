"""Cross-field checks: the engine's topology rules, stages, speculative widths, taps.

Each message names every field involved and its value, e.g.
`tp=8 is not divisible by dp=3 with dp_attention`; the engine's rules also cite the engine
function that refuses the topology.
"""

from __future__ import annotations

from specplan.errors import Diagnostic
from specplan.methods import get_method
from specplan.schema.model import TAP_METHODS, TREE_METHODS, Spec
from specplan.schema.yaml_source import YamlSource


def cross_checks(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for check in (_engine, _partition, _speculative, _taps):
        out.extend(check(spec, src))
    return out


def _engine(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    """The topologies the spec's engine refuses (its convention's rules, specplan/engines/); a
    release outside the engine's table is refused first, listing the supported ones."""
    from specplan.engines import of  # engines build on schema: imported at call time
    from specplan.engines.releases import UnknownRelease

    try:
        conv = of(spec)
    except UnknownRelease as exc:
        return [src.diag(("engine_version",), str(exc))]
    return [src.diag(v.path, v.message) for v in conv.violations(spec)]


def _partition(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    m, pp = spec.model, spec.topology.pp
    at = ("model", "pp_partition")
    if m.pp_partition is None:
        if pp > m.num_layers:
            return [src.diag(("topology", "pp"), f"pp={pp} stages for num_layers={m.num_layers}: "
                             "every stage needs at least one layer")]
        return []
    out = []
    if len(m.pp_partition) != pp:
        out.append(src.diag(at, f"lists {len(m.pp_partition)} stages, expected pp={pp}"))
    if sum(m.pp_partition) != m.num_layers:
        out.append(src.diag(at, f"layers sum to {sum(m.pp_partition)}, expected num_layers={m.num_layers}"))
    return out


def _speculative(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    s = spec.speculative
    at = ("speculative",)
    if not get_method(s.method).speculates:
        extra = [k for k in ("num_steps", "num_draft_tokens", "aux_layers")
                 if getattr(s, k) not in (None, 0)]
        return [src.diag(at + (k,), f"{k} is set but method is {s.method!r}") for k in extra]
    out = []
    if _trie(spec):
        return _trie_widths(spec, src)
    if s.num_steps < 1:
        out.append(src.diag(at + ("num_steps",), f"method {s.method!r} needs num_steps >= 1, found {s.num_steps}"))
        return out
    if s.topk > 1 and s.method not in TREE_METHODS:
        out.append(src.diag(at + ("topk",), f"topk={s.topk} asks for a tree, which method {s.method!r} "
                            f"does not build; tree methods: {', '.join(TREE_METHODS)}"))
    if s.num_draft_tokens is not None:
        top, bound = _draft_tree_bound(spec)
        if not 2 <= s.num_draft_tokens <= top:
            out.append(src.diag(at + ("num_draft_tokens",), f"num_draft_tokens={s.num_draft_tokens} must be in "
                                f"2 .. {bound} = {top} (topk={s.topk}, num_steps={s.num_steps})"))
    if s.aux_layers is not None and s.method not in TAP_METHODS:
        out.append(src.diag(at + ("aux_layers",), f"aux_layers is set but method {s.method!r} reads no taps; "
                            f"tap methods: {', '.join(TAP_METHODS)}"))
    return out


def _draft_tree_bound(spec: Spec) -> tuple[int, str]:
    """The engine's widest draft tree for the spec's topk and num_steps (engines/<engine>/)."""
    from specplan.engines import convention  # engines build on schema: imported at call time

    s = spec.speculative
    return convention(spec.engine).max_draft_tokens(s.topk, s.num_steps)


def _trie(spec: Spec) -> bool:
    from specplan.engines import convention  # engines build on schema: imported at call time

    return convention(spec.engine).method(spec.speculative.method).trie


def _trie_widths(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    """A trie of num_draft_tokens nodes (methods/ngram.py): any width from 2 (a root and one
    draft) to MAX_DRAFT_TOKENS (the schema's), whatever num_steps and topk are, as the engine."""
    s, at = spec.speculative, ("speculative",)
    if s.verify_width >= 2:
        return []
    key = "num_draft_tokens" if s.num_draft_tokens is not None else "num_steps"
    return [src.diag(at + (key,), f"method {s.method!r} verifies a trie of num_draft_tokens "
                     f"nodes, root included, and needs at least 2 (one draft), found "
                     f"num_draft_tokens={s.num_draft_tokens}, num_steps={s.num_steps}; set "
                     "num_draft_tokens (SGLang --speculative-num-draft-tokens, default 12)")]


def _taps(spec: Spec, src: YamlSource) -> list[Diagnostic]:
    s, layers = spec.speculative, spec.model.num_layers
    if s.method not in TAP_METHODS:
        return []
    if s.aux_layers is None:
        if layers >= 3:
            return []
        return [src.diag(("speculative", "method"), f"method {s.method!r} reads the default taps "
                         f"2, num_layers//2, num_layers-3, which need num_layers >= 3, found "
                         f"num_layers={layers}; set speculative.aux_layers")]
    out = []
    for i, tap in enumerate(s.aux_layers):
        if tap > layers:
            out.append(src.diag(("speculative", "aux_layers", i), f"tap {tap} is outside the model: "
                                f"taps run 0 .. num_layers={layers}"))
        elif s.aux_layers.index(tap) != i:
            out.append(src.diag(("speculative", "aux_layers", i), f"tap {tap} is listed twice"))
    if not s.aux_layers:
        out.append(src.diag(("speculative", "aux_layers"), f"method {s.method!r} needs at least one tap"))
    return out
