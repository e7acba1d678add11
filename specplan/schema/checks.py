"""Cross-field checks: sizes that must divide, widths that must fit, taps inside the model.

Each message names every field involved and its value, e.g.
`tp=8 is not divisible by dp=3 with dp_attention`.
"""

from __future__ import annotations

from specplan.errors import Diagnostic
from specplan.schema.model import TAP_METHODS, TREE_METHODS, Spec
from specplan.schema.yaml_source import Source


def cross_checks(spec: Spec, src: Source) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    for check in (_sglang_layout, _vllm_layout, _nodes, _partition, _speculative, _taps):
        out.extend(check(spec, src))
    return out


def _sglang_layout(spec: Spec, src: Source) -> list[Diagnostic]:
    if spec.engine != "sglang":
        return []
    t = spec.topology
    at = ("topology",)
    out = []
    attn_dp = t.dp if t.dp_attention else 1
    if t.dp_attention and t.tp % t.dp:
        out.append(src.diag(at + ("dp",), f"tp={t.tp} is not divisible by dp={t.dp} with dp_attention"))
    elif t.tp % (attn_dp * t.cp):
        how = f"dp={t.dp} * cp={t.cp}" if t.dp_attention else f"cp={t.cp}"
        out.append(src.diag(at + ("cp",), f"tp={t.tp} is not divisible by {how}"))
    elif (t.tp // attn_dp // t.cp) % t.dcp:
        attn_tp = t.tp // attn_dp // t.cp
        out.append(src.diag(at + ("dcp",), f"dcp={t.dcp} does not divide the attention TP width "
                                           f"{attn_tp} (tp={t.tp} / attn_dp={attn_dp} / cp={t.cp})"))
    if t.tp % (t.ep * t.moe_dp):
        out.append(src.diag(at + ("ep",), f"tp={t.tp} is not divisible by ep={t.ep} * moe_dp={t.moe_dp}"))
    if (t.ep > 1 or t.moe_dp > 1) and spec.model.moe is None:
        out.append(src.diag(at + ("ep" if t.ep > 1 else "moe_dp",),
                            f"ep={t.ep}, moe_dp={t.moe_dp} need a mixture-of-experts model (model.moe)"))
    return out


def _vllm_layout(spec: Spec, src: Source) -> list[Diagnostic]:
    if spec.engine != "vllm":
        return []
    t = spec.topology
    at = ("topology",)
    out = []
    if t.dp_attention:
        out.append(src.diag(at + ("dp_attention",), "dp_attention is an sglang option; with engine "
                            "vllm every dp rank already runs its own attention (set it false)"))
    if t.moe_dp != 1:
        out.append(src.diag(at + ("moe_dp",), f"moe_dp={t.moe_dp} is an sglang option; expected 1 with engine vllm"))
    wide = t.dp * t.cp * t.tp
    if t.ep not in (1, wide):
        out.append(src.diag(at + ("ep",), f"ep={t.ep} must be 1 or dp*cp*tp = {t.dp}*{t.cp}*{t.tp} = {wide} "
                            "with engine vllm (expert parallel spans a whole stage)"))
    if t.ep > 1 and spec.model.moe is None:
        out.append(src.diag(at + ("ep",), f"ep={t.ep} needs a mixture-of-experts model (model.moe)"))
    if t.tp % t.dcp:
        out.append(src.diag(at + ("dcp",), f"dcp={t.dcp} does not divide tp={t.tp}"))
    elif t.cp > 1 and t.dcp > 1 and t.dcp % t.cp and t.cp % t.dcp:
        out.append(src.diag(at + ("dcp",), f"dcp={t.dcp} and cp={t.cp}: one must divide the other "
                            "(vLLM's DCP groups span the PCP ranks)"))
    return out


def _world(spec: Spec) -> int:
    t = spec.topology
    if spec.engine == "vllm":
        return t.dp * t.pp * t.cp * t.tp
    return t.tp * t.pp * (1 if t.dp_attention else t.dp)


def _nodes(spec: Spec, src: Source) -> list[Diagnostic]:
    total = _world(spec)
    n = spec.topology.nodes
    if total % n:
        return [src.diag(("topology", "nodes"), f"nodes={n} does not divide the {total} ranks")]
    return []


def _partition(spec: Spec, src: Source) -> list[Diagnostic]:
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


def _speculative(spec: Spec, src: Source) -> list[Diagnostic]:
    s = spec.speculative
    at = ("speculative",)
    if s.method == "none":
        extra = [k for k in ("num_steps", "num_draft_tokens", "aux_layers")
                 if getattr(s, k) not in (None, 0)]
        return [src.diag(at + (k,), f"{k} is set but method is 'none'") for k in extra]
    out = []
    if s.num_steps < 1:
        out.append(src.diag(at + ("num_steps",), f"method {s.method!r} needs num_steps >= 1, found {s.num_steps}"))
        return out
    if s.topk > 1 and s.method not in TREE_METHODS:
        out.append(src.diag(at + ("topk",), f"topk={s.topk} asks for a tree, which method {s.method!r} "
                            f"does not build; tree methods: {', '.join(TREE_METHODS)}"))
    if s.num_draft_tokens is not None:
        top = 1 + s.topk * s.num_steps
        if not 2 <= s.num_draft_tokens <= top:
            out.append(src.diag(at + ("num_draft_tokens",), f"num_draft_tokens={s.num_draft_tokens} must be in "
                                f"2 .. 1 + topk*num_steps = {top} (topk={s.topk}, num_steps={s.num_steps})"))
    if s.aux_layers is not None and s.method not in TAP_METHODS:
        out.append(src.diag(at + ("aux_layers",), f"aux_layers is set but method {s.method!r} reads no taps; "
                            f"tap methods: {', '.join(TAP_METHODS)}"))
    return out


def _taps(spec: Spec, src: Source) -> list[Diagnostic]:
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
