"""The planner's output: the passes' sections as a Plan (plan.json, versioned, fingerprinted).

Both hashes are taken over canonical JSON (sorted keys, no whitespace; the fingerprint leaves
out the sites' YAML line numbers), so comments and key order in the YAML change neither;
re-running compile on the same spec writes the same bytes.
The file grows with group families and rank classes, never with ranks: families are stored
as rules (`explain --json` still lists every group).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from specplan.engines import of
from specplan.engines.releases import newest
from specplan.files import write_atomic
from specplan.methods.base import nbytes
from specplan.passes import Planning
from specplan.passes.pin_widths import field_shape
from specplan.plan.artifact import SCHEMA_VERSION, Plan, canonical, fingerprint
from specplan.plan.codec import decode
from specplan.schema.model import DEVICE_BACKENDS



# Keys added after plans were first fingerprinted: left out while unset, so a spec that does
# not write them keeps its fingerprint.
_LATER_KEYS = {"model": ("num_kv_heads", "attention", "kv_cache_dtype", "page_size"),
               "speculative": ("draft_num_layers",), "": ("disaggregation",),
               "runtime": ("async_scheduling",), "topology": ("dp_lm_head",)}


def spec_sha256(p: Planning) -> str:
    data = p.spec.model_dump(mode="json")
    data.pop("engine_args", None)  # the launch line's spelling: no part of the plan
    if data.get("engine_version") in (None, newest(data["engine"])):
        data.pop("engine_version", None)  # the newest release, named or not: plans as before
    if data["model"]["moe"] and not data["model"]["moe"]["eplb"]:
        data["model"]["moe"].pop("eplb")
    for section, keys in _LATER_KEYS.items():
        part = data[section] if section else data
        for key in keys:
            if part.get(key) in (None, False):
                part.pop(key, None)
    return hashlib.sha256(canonical(data)).hexdigest()


def build_plan(p: Planning) -> Plan:
    """The Plan of a planned spec: decoded by the same reader as plan.json, so a planner bug
    that writes a malformed plan fails here (an internal error), not in a reader later."""
    spec, s = p.spec, p.graph.sections
    plan: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": spec.name,
        "engine": spec.engine,
        "spec_sha256": spec_sha256(p),
        "fingerprint": "",
        "world_size": p.mesh.world_size,
        "num_worlds": p.mesh.num_worlds,
        "device": spec.topology.device,
        "backend": spec.topology.backend or DEVICE_BACKENDS[spec.topology.device],
        "widths": p.mesh.widths,
        "derived": p.mesh.derived,
        "model": _model(p),
        "speculative": _speculative(p),
        "sync": {"policy": spec.sync.policy, "sites": dict(sorted(spec.sync.sites.items()))},
        "families": [_family(f) for f in s["families"].values()],
        "sites": [_site(p, name, e) for name, e in s["sites"].items()],
        "boundaries": s["boundaries"],
        "buffer_bytes": s["buffer_bytes"],
        "unfused": s["unfused"],
        "pipeline": s["pipeline"],
        "dp_agreement": s["dp_agreement"],
        "moe": s["moe"],
        "rank_classes": s["rank_classes"],
        "in_flight": s["in_flight"],
        "passes": list(p.graph.passes_run),
        "runtime": _runtime(p),
        "behaviour": _behaviour(p),
        "source": _source(p),
    }
    refused = of(spec).launch_refusal(spec)  # the one rule export refuses by, too
    if refused:
        plan["launch_refusal"] = refused
    plan["fingerprint"] = fingerprint(plan)
    return decode(Plan, plan)


def write_plan(plan: Plan, out_dir: str | Path) -> Path:
    """Write plan.json atomically (a temporary file renamed into place)."""
    return write_atomic(Path(out_dir) / "plan.json", plan.dumps())


def _model(p: Planning) -> dict:
    m = p.spec.model
    return {"num_layers": m.num_layers, "hidden_size": m.hidden_size, "vocab_size": m.vocab_size,
            "dtype": m.dtype, "moe": _moe(m.moe)}


def _moe(moe) -> dict | None:
    if moe is None:
        return None
    out = {"num_experts": moe.num_experts, "top_k": moe.top_k, "a2a": moe.a2a}
    if moe.eplb:
        out["eplb"] = True  # experts move at rebalance steps: every rank at the same step
    return out


def _speculative(p: Planning) -> dict:
    sp = p.spec.speculative
    return {"method": sp.method, "num_steps": sp.num_steps, "topk": sp.topk,
            "num_draft_tokens": sp.verify_width, "sampling": sp.sampling,
            "taps": list(sp.taps(p.spec.model.num_layers)), "max_batch": p.spec.runtime.max_batch}


KNOBS = ("behaviour", "engine", "speculative.method", "speculative.sampling", "speculative.aux_layers",
         "topology.dp_attention", "topology.cp", "topology.device", "sync.policy", "sync.group",
         "sync.idle_ranks", "pipeline.relay", "pipeline.relay_drafts", "pipeline.payload_width",
         "pipeline.draft_layer_ids", "pipeline.tap_ids", "pipeline.aux_routing",
         "pipeline.sample_discount")


def _behaviour(p: Planning) -> dict:
    c = p.choices
    return {"mode": c.behaviour, "group": c.group, "relay": c.relay, "rng_is_float": c.rng_is_float,
            "lockstep_sites": sorted(c.lockstep_sites), "notes": list(c.notes)}


def _source(p: Planning) -> dict:
    """Where findings point in the YAML; left out of the fingerprint (comments move lines)."""
    lines = {}
    src = p.spec._source
    for knob in KNOBS + tuple(f"sync.sites.{s}" for s in p.spec.sync.sites):
        where = src.key_at.get(tuple(knob.split("."))) if src is not None else None
        if where is not None:  # only keys the YAML really writes
            lines[knob] = where[0]
    return {"spec_file": p.spec.line_of()[0], "lines": lines}


def _runtime(p: Planning) -> dict:
    r = p.spec.runtime
    out = {"max_batch": r.max_batch, "timeout_s": r.timeout_s, "trace_dir": r.trace_dir,
           "probe_every": r.probe_every, "batch_identity": r.batch_identity}
    if r.async_scheduling is not None:
        out["async_scheduling"] = r.async_scheduling
    return out


def _family(f) -> dict:
    return {"name": f.name, "rule": f.rule(), "group_size": f.group_size, "num_groups": f.num_groups}


def _site(p: Planning, name: str, e: dict) -> dict:
    decisions = []
    for dname in e["decisions"]:
        d = p.method.decision(dname)
        dims = field_shape(p, d.shape)
        decisions.append({"name": dname, "symbols": list(d.shape), "shape": dims, "dtype": d.dtype,
                          "nature": d.nature, "bytes": nbytes(dims, d.dtype)})
    return {"name": name, "round": e["round"], "phase": e["phase"], "kind": e["kind"],
            "decisions": decisions, "family": e["family"], "source_member": e["source_member"],
            "readers": e["readers"], "converge": e["converge"], "reason": e["reason"],
            "trivial": e["trivial"],
            "boundary": e.get("boundary"), "line": p.line("sync", "sites", name) or p.line("sync", "policy")}
