"""The cross-instance check: do a prefill and a decode instance agree on what they hand over?

Each finding names both files. ERROR: the engines refuse the pairing at start-up (decode PP,
decode CP, a pull connector under decode PP, MLA sharding with unequal TP, a TP ratio that is
no integer), a model or KV layout that differs, a speculative setup that differs, layer names
the two sides read differently (the seed's PP-local draft-layer numbering), draft KV decode
expects and no prefill rank sends, a producer that frees blocks before every reader is done.
WARN: heterogeneous TP on a non-MLA model; a decode drafter that needs prefill-time hidden
states the prefill instance does not keep. No torch, no planner: the handoff plan only.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from specplan.deploy.geometry import Geometry
from specplan.deploy.handoff import Handoff
from specplan.methods import get_method
from specplan.verify.findings import Record


@dataclass(frozen=True)
class CrossFinding(Record):
    severity: str  # ERROR | WARN
    kind: str
    where: tuple[str, str]  # prefill file:line, decode file:line
    message: str
    fix: str


def check_deployment(h: Handoff) -> list[CrossFinding]:
    found = []
    for check in (_refused, _model, _speculative, _layer_names, _draft_kv, _consumers,
                  _hetero_tp, _hidden_states):
        found += check(h)
    order = {"ERROR": 0, "WARN": 1}
    return sorted(found, key=lambda f: (order[f.severity], f.kind, f.message))


def _pair(h: Handoff, *path: str) -> tuple[str, str]:
    return (h.prefill.line(*path), h.decode.line(*path))


def _refused(h: Handoff) -> list[CrossFinding]:
    at = {"decode-cp": ("topology", "cp"), "pp-refused": ("topology", "pp"),
          "pull-pp": ("topology", "pp"), "tp-ratio": ("topology", "tp"),
          "decode-dcp": ("topology", "dcp"), "replicated-kv": ("topology", "tp"),
          "pcp-refused": ("topology", "cp"), "dcp-refused": ("topology", "dcp")}
    return [CrossFinding("ERROR", r.kind, _pair(h, *at[r.kind]), r.message, _FIX[r.kind])
            for r in h.refusals]


_FIX = {
    "decode-cp": "run the decode instance with cp: 1",
    "pp-refused": "give the decode instance pp: 1 or the prefill's pp",
    "pull-pp": "give the decode instance pp: 1 (or a connector that exchanges pp_size: mooncake)",
    "tp-ratio": "pick attention TP sizes where one divides the other",
    "decode-dcp": "give both instances the same dcp, or an MLA prefill with dcp 1 and cp 1 to a "
                  "DCP-sharded MLA decode",
    "replicated-kv": "give the prefill at most as many TP ranks as KV heads, or a decode TP at "
                     "least the prefill's (or the mooncake connector)",
    "dcp-refused": "pick DCP sizes the connector pairs: equal ones at equal attention TP (SGLang), "
                   "sizes that divide one another (vLLM nixl), dcp 1 on both instances (vLLM "
                   "nixl_push)",
    "pcp-refused": "run prefill context parallel with dcp 1 or dcp = pcp (and TP 1 when sharded) "
                   "over nixl, and a decode without DCP against replicated PCP",
}

# (label, how to read it from an instance's geometry, the YAML path to point at)
_MODEL = (
    ("model.path", lambda g: g.spec.model.path, ("model", "path")),
    ("model.num_layers", lambda g: g.num_layers, ("model", "num_layers")),
    ("model.hidden_size", lambda g: g.spec.model.hidden_size, ("model", "hidden_size")),
    ("model.vocab_size", lambda g: g.spec.model.vocab_size, ("model", "vocab_size")),
    ("model.attention", lambda g: g.attention, ("model", "attention")),
    ("model.num_kv_heads", lambda g: g.num_kv_heads, ("model", "num_kv_heads")),
    ("model.kv_cache_dtype", lambda g: g.kv_cache_dtype, ("model", "kv_cache_dtype")),
    ("model.page_size", lambda g: g.page_size, ("model", "page_size")),
)


def _differ(h: Handoff, table, kind: str, fix: str) -> list[CrossFinding]:
    out = []
    for label, read, path in table:
        a, b = read(h.prefill), read(h.decode)
        if a != b:
            out.append(CrossFinding("ERROR", kind, _pair(h, *path),
                                    f"{label} differs: prefill {a}, decode {b}", fix.format(label)))
    return out


def _model(h: Handoff) -> list[CrossFinding]:
    return _differ(h, _MODEL, "model", "give both instances the same {}: the KV one writes is "
                   "read by the other as its own")


def _speculative(h: Handoff) -> list[CrossFinding]:
    if not get_method(h.prefill.method).speculates:
        return []  # a prefill without speculation: _draft_kv and _hidden_states say what is missing
    table = (
        ("speculative.method", lambda g: g.method, ("speculative", "method")),
        ("speculative.num_steps", lambda g: g.spec.speculative.num_steps, ("speculative", "num_steps")),
        ("speculative.draft_path", lambda g: g.spec.speculative.draft_path, ("speculative", "draft_path")),
        ("speculative taps (aux_layers or their default)", lambda g: list(g.taps),
         ("speculative", "aux_layers")),
    )
    return _differ(h, table, "speculative", "give both instances the same {}")


def _layer_names(h: Handoff) -> list[CrossFinding]:
    p, d = h.prefill, h.decode
    out = []
    if p.draft_layers and d.draft_layers and p.draft_layers != d.draft_layers:
        out.append(CrossFinding("ERROR", "layer-names", _pair(h, "pipeline", "draft_layer_ids"),
                                _draft_names(h), "number draft layers after the target's total "
                                "layers on both instances (pipeline.draft_layer_ids: global)"))
    for stage, (start, end) in enumerate(d.stages):
        got = _received_target(h, stage)
        if got != set(range(start, end)):
            out.append(CrossFinding("ERROR", "layer-names", _pair(h, "topology", "pp"),
                                    f"decode stage {stage} holds layers [{start}, {end}) but the "
                                    f"handoff writes {_ranges(got)} into it",
                                    "give both instances the same layer split per stage"))
    return out


def _draft_names(h: Handoff) -> str:
    p, d = h.prefill, h.decode
    last = p.stages[-1]
    text = (f"draft layers: prefill stage {p.pp - 1} registers {_names(p.draft_layers)} "
            f"(numbered {p.choices.draft_layer_ids}), decode stage {d.pp - 1} registers "
            f"{_names(d.draft_layers)} (numbered {d.choices.draft_layer_ids}); "
            f"{h.rules.naming}, so the two instances mean different layers by one name")
    clash = [i for i in p.draft_layers if i < p.num_layers]
    if clash:
        text += (f"; {_span(clash)} also collide with the target's own layer names (prefill "
                 f"stage {p.pp - 1} holds target layers {last[0]}..{last[1] - 1})")
    return text


def _span(ids) -> str:
    return f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else str(ids[0])


def _names(ids: tuple[int, ...]) -> str:
    return f"model.layers.{_span(ids)}"


def _received_target(h: Handoff, stage: int) -> set[int]:
    got = h.receipts.get(stage)
    if got is None:
        return set(range(*h.decode.stages[stage]))  # refused: nothing planned to compare
    return {i for start, end in got.target for i in range(start, end)}


def _ranges(ids: set[int]) -> str:
    if not ids:
        return "no target layer"
    out: list[str] = []
    ordered = sorted(ids)
    start = prev = ordered[0]
    for i in ordered[1:]:
        if i == prev + 1:
            prev = i
            continue
        out.append(f"[{start}, {prev + 1})")
        start = prev = i
    out.append(f"[{start}, {prev + 1})")
    return ", ".join(out)


def _draft_kv(h: Handoff) -> list[CrossFinding]:
    d = h.decode
    if not d.draft_layers or not h.classes:
        return []
    if h.receipts[d.pp - 1].drafts:
        return []
    why = (f"the prefill instance runs method {h.prefill.method}, which keeps no draft KV"
           if not h.prefill.draft_layers else f"the {h.rules.connector} connector routes by "
           "layer name and finds none of them on the prefill side")
    return [CrossFinding("ERROR", "draft-kv", _pair(h, "speculative", "method"),
                         f"draft KV expected by decode ({_names(d.draft_layers)}) that no prefill "
                         f"rank sends: {why}", "run the same drafter on the prefill instance, "
                         "with the same draft-layer ids")]


def _consumers(h: Handoff) -> list[CrossFinding]:
    """The producer frees a block after `consumers_per_source` notifications: fewer than the
    decode ranks that read it, and a reader finds its blocks reused mid-transfer."""
    counted = {}
    # every rank of a class pulls as its class does; in rank order the last reader's count stands
    for key in sorted(h.classes, key=h.last_rank.__getitem__):
        e = h.classes[key]
        for source in product(e["prefill_tp_ranks"], e["prefill_cp_ranks"], e["prefill_pp_ranks"]):
            counted[source] = e["consumers_per_source"]
    short = sorted((s, n) for s, n in counted.items() if h.consumers_seen.get(s, 0) > n)
    if not short:
        return []
    (tp, cp, pp), n = short[0]
    return [CrossFinding("ERROR", "consumers", _pair(h, "topology", "pp"),
                         f"prefill rank (tp {tp}, cp {cp}, stage {pp}) frees a block after {n} "
                         f"consumer notification(s) while {h.consumers_seen[(tp, cp, pp)]} decode "
                         f"ranks read it ({len(short)} prefill ranks like it)",
                         "use a connector that counts every reader (decode PP included)")]


def _hetero_tp(h: Handoff) -> list[CrossFinding]:
    p, d = h.prefill, h.decode
    if p.attn_tp == d.attn_tp or d.is_mla or not h.classes:
        return []
    return [CrossFinding("WARN", "hetero-tp", _pair(h, "topology", "tp"),
                         f"attention TP differs (prefill {p.attn_tp}, decode {d.attn_tp}) on a "
                         f"{d.attention} model: each decode rank gathers KV heads from "
                         "several ranks or a slice of one; the engines warn that performance "
                         "is not guaranteed", "use the same attention TP, or an MLA model")]


def _hidden_states(h: Handoff) -> list[CrossFinding]:
    p, d = h.prefill, h.decode
    if get_method(d.method).drafter != "head":
        return []
    missing = _not_kept(p, d)
    if not missing:
        return []
    return [CrossFinding("WARN", "hidden-states", _pair(h, "speculative", "method"),
                         f"the decode drafter ({d.method}) starts from prefill-time hidden states "
                         f"{missing}", "run the same speculative method on the prefill instance, "
                         "with its taps kept on the last stage")]


def _not_kept(p: Geometry, d: Geometry) -> str:
    if not get_method(p.method).speculates:
        return "that the prefill instance (method none) does not keep"
    if p.choices.aux_routing != "dropped" or p.pp == 1:
        return ""
    last_start = p.stages[-1][0]
    early = [t for t in d.taps if t <= last_start]
    if not early:
        return ""
    return (f"(taps {early}) that prefill stages before the last produce and the prefill "
            "instance does not relay to its last stage")
