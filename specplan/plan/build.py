"""The planner's output: the passes' draft as a Plan (plan.json, versioned, fingerprinted).

The draft (specplan/ir/draft.py) has plan.json's objects under plan.json's names, so it goes
to the plan's one reader (ir/codec.py `decode`, named as plan/codec.py) as it is; the parts
the spec alone gives (model, speculative, sync, runtime, behaviour, source) and the sites'
sized decisions are built here as the plan's own objects. `compile` is the one call from a Spec to its Plan.

Both hashes are taken over canonical JSON (sorted keys, no whitespace; the fingerprint leaves
out the sites' YAML line numbers), so comments and key order in the YAML change neither;
re-running compile on the same spec writes the same bytes.
The file grows with group families and rank classes, never with ranks: families are stored
as rules (`explain --json` still lists every group).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from specplan.engines import of, shown_version
from specplan.engines.releases import newest
from specplan.io.files import write_atomic
from specplan.mesh import Family
from specplan.methods.base import nbytes
from specplan.ir.draft import SiteDraft
from specplan import passes
from specplan.passes import Planning
from specplan.passes.pin_widths import field_shape
from specplan.plan.artifact import SCHEMA_VERSION, Plan, canonical, fingerprint
from specplan.plan.codec import ABSENT, decode, encode, given
from specplan.plan.model import (Behaviour, Decision, FamilyRule, Model, MoeShape, Rule,
                                 RuntimeSettings, Site, Source, Speculative, Sync)
from specplan.schema import Spec
from specplan.schema.model import DEVICE_BACKENDS, Moe


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


def compile(spec: Spec) -> Plan:
    """The Plan of a spec: every pass, then `build_plan` (`passes.plan(spec, upto=NAME)` runs
    part of the pipeline, for the pass tests)."""
    return build_plan(passes.plan(spec))


def build_plan(p: Planning) -> Plan:
    """The Plan of a planned spec: its draft read by the same reader as plan.json, so a
    planner bug that drafts a malformed plan fails here (an internal error), not in a reader
    later."""
    spec, d = p.spec, p.draft
    refused = of(spec).launch_refusal(spec)  # the one rule export refuses by, too
    built = decode(Plan, _given(
        schema_version=SCHEMA_VERSION,
        name=spec.name,
        engine=spec.engine,
        spec_sha256=spec_sha256(p),
        fingerprint="",
        world_size=p.mesh.world_size,
        num_worlds=p.mesh.num_worlds,
        device=spec.topology.device,
        backend=spec.topology.backend or DEVICE_BACKENDS[spec.topology.device],
        widths=p.mesh.widths,
        derived=p.mesh.derived,
        model=_model(p),
        speculative=_speculative(p),
        sync=Sync(policy=spec.sync.policy, sites=dict(sorted(spec.sync.sites.items()))),
        families=tuple(_family(f) for f in given(d.families).values()),
        sites=tuple(_site(p, site) for site in given(d.sites).values()),
        gates=tuple(given(d.gates)),
        boundaries=d.boundaries,
        buffer_bytes=d.buffer_bytes,
        unfused=d.unfused,
        pipeline=d.pipeline,
        dp_agreement=d.dp_agreement,
        moe=d.moe,
        rank_classes=d.rank_classes,
        in_flight=d.in_flight,
        passes=tuple(p.graph.passes_run),
        runtime=_runtime(p),
        behaviour=_behaviour(p),
        source=_source(p),
        launch_refusal=refused or ABSENT,
        engine_version=shown_version(spec) or ABSENT,  # the newest: unsaid, as in spec_sha256
    ))
    return replace(built, fingerprint=fingerprint(encode(built)))


def _given(**fields: object) -> dict[str, object]:
    """The Plan's fields but ABSENT ones: a fact no pass filled reads as a missing key."""
    return {k: v for k, v in fields.items() if v is not ABSENT}


def write_plan(plan: Plan, out_dir: str | Path) -> Path:
    """Write plan.json atomically (a temporary file renamed into place)."""
    return write_atomic(Path(out_dir) / "plan.json", plan.dumps())


def _model(p: Planning) -> Model:
    m = p.spec.model
    return Model(num_layers=m.num_layers, hidden_size=m.hidden_size, vocab_size=m.vocab_size,
                 dtype=m.dtype, moe=_moe(m.moe))


def _moe(moe: Moe | None) -> MoeShape | None:
    if moe is None:
        return None
    # eplb: experts move at rebalance steps, every rank at the same step; left out when off
    return MoeShape(num_experts=moe.num_experts, top_k=moe.top_k, a2a=moe.a2a,
                    eplb=True if moe.eplb else ABSENT)


def _speculative(p: Planning) -> Speculative:
    sp = p.spec.speculative
    return Speculative(method=sp.method, num_steps=sp.num_steps, topk=sp.topk,
                       num_draft_tokens=sp.verify_width, sampling=sp.sampling,
                       taps=tuple(sp.taps(p.spec.model.num_layers)),
                       max_batch=p.spec.runtime.max_batch)


KNOBS = ("behaviour", "engine", "speculative.method", "speculative.sampling", "speculative.aux_layers",
         "topology.dp_attention", "topology.cp", "topology.device", "sync.policy", "sync.group",
         "sync.idle_ranks", "pipeline.relay", "pipeline.relay_drafts", "pipeline.payload_width",
         "pipeline.draft_layer_ids", "pipeline.tap_ids", "pipeline.aux_routing",
         "pipeline.sample_discount")


def _behaviour(p: Planning) -> Behaviour:
    c = p.choices
    return Behaviour(mode=c.behaviour, group=c.group, relay=c.relay, rng_is_float=c.rng_is_float,
                     lockstep_sites=tuple(sorted(c.lockstep_sites)), notes=tuple(c.notes))


def _source(p: Planning) -> Source:
    """Where findings point in the YAML; left out of the fingerprint (comments move lines)."""
    lines = {}
    src = p.spec._source
    for knob in KNOBS + tuple(f"sync.sites.{s}" for s in p.spec.sync.sites):
        where = src.key_at.get(tuple(knob.split("."))) if src is not None else None
        if where is not None:  # only keys the YAML really writes
            lines[knob] = where[0]
    return Source(spec_file=p.spec.line_of()[0], lines=lines)


def _runtime(p: Planning) -> RuntimeSettings:
    r = p.spec.runtime
    return RuntimeSettings(max_batch=r.max_batch, timeout_s=r.timeout_s, trace_dir=r.trace_dir,
                           probe_every=r.probe_every, batch_identity=r.batch_identity,
                           async_scheduling=ABSENT if r.async_scheduling is None else r.async_scheduling)


def _family(f: Family) -> FamilyRule:
    rule = Rule(shape=tuple(f.shape), strides=tuple(f.strides), group_ndim=f.group_ndim,
                alias=f.alias or ABSENT)
    return FamilyRule(name=f.name, rule=rule, group_size=f.group_size, num_groups=f.num_groups)


def _site(p: Planning, site: SiteDraft) -> Site:
    decisions = []
    for name in site.decisions:
        d = p.method.decision(name)
        dims = tuple(field_shape(p, d.shape))
        decisions.append(Decision(name=name, symbols=tuple(d.shape), shape=dims, dtype=d.dtype,
                                  nature=d.nature, bytes=nbytes(dims, d.dtype)))
    return Site(name=site.name, round=site.round, phase=site.phase, kind=site.kind,
                decisions=tuple(decisions), family=site.family, source_member=site.source_member,
                readers=site.readers, converge=given(site.converge), reason=given(site.reason),
                trivial=given(site.trivial), boundary=site.boundary,
                line=p.line("sync", "sites", site.name) or p.line("sync", "policy"))
