"""From a user's spec to the sim's: a CPU topology, a tiny model, a compiled plan.

Torch-free. The sim keeps the topology, the method and the sync policy as written and
changes only what a CPU cannot hold: the backend (gloo; the device stays as written, since an
engine's own behaviour depends on it, and every rank binds the CPU), runtime limits (a short timeout,
the probe every round, max_batch = the requests one replica serves), and the model: hidden
and vocab become small, and a model deeper than --max-layers is shrunk to it, keeping the
number of stages, which stage owns which tap and every stage non-empty (a middle stage stays
a middle stage). `Prepared.shrunk` lists every change, for the report.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specplan.engines import convention
from specplan.errors import Diagnostic, PlanError, UserError
from specplan.plan import ABSENT, Plan

SIM_VOCAB = 512
HEAD_DIM = 16
SIM_TIMEOUT_S = 20.0  # the collectives' timeout: a hang ends as a named failure within it
SIM_TIMEOUT_PER_RANK_S = 2.5  # ... raised past 8 ranks, which share a CPU's few cores


def collective_timeout_s(world: int, given: float | None = None) -> float:
    """The sim plan's runtime.timeout_s: `given` (simulate --timeout-s), else 20 s, and 2.5 s a
    rank from 8 ranks up (the ranks share the machine's cores: a round's slowest rank waits longer
    with more of them). A function of the world alone, so every torchrun rank plans alike."""
    return given if given is not None else max(SIM_TIMEOUT_S, SIM_TIMEOUT_PER_RANK_S * world)


@dataclass
class Prepared:
    spec: dict  # the sim's spec, as plain data
    plan: Plan
    model: dict  # ModelConfig fields
    replicas: int
    shrunk: list[str] = field(default_factory=list)


def _partition(spec) -> list[int]:
    m, pp = spec.model, spec.topology.pp
    if m.pp_partition:
        return list(m.pp_partition)
    return convention(spec.engine, spec.engine_version).split_layers(m.num_layers, pp)


def _shrink_counts(counts: list[int], target: int) -> list[int]:
    total = sum(counts)
    new = [max(1, c * target // total) for c in counts]
    i = 0
    while sum(new) < target:  # hand the rounding loss back, largest stages first
        order = sorted(range(len(counts)), key=lambda s: -counts[s])
        new[order[i % len(order)]] += 1
        i += 1
    return new


def _remap_taps(taps, old: list[int], new: list[int]) -> list[int] | None:
    """Each tap on the stage that owned it, at the same relative depth, and apart from the others;
    a tap below the model's end (an output the engine captures inside its layer loop) stays below
    the shrunk model's end. None when the shrunk stages cannot hold them so."""
    bounds, o_start, n_start = [], 0, 0
    for oc, nc in zip(old, new):
        bounds.append((o_start, o_start + oc, n_start, n_start + nc))
        o_start, n_start = o_start + oc, n_start + nc
    out: list[int] = []
    for t in sorted(taps):
        if t == 0:
            out.append(0)
            continue
        os_, oe, ns, ne = next(b for b in bounds if b[0] < t <= b[1])
        top = ne - 1 if t < o_start and ne == n_start else ne  # the last stage's end stays out
        cand = min(top, ns + max(1, round((t - os_) / (oe - os_) * (ne - ns))))
        while cand in out and cand < top:
            cand += 1
        while cand in out and cand > ns + 1:
            cand -= 1
        if cand <= ns or cand in out:
            return None
        out.append(cand)
    return sorted(out)


def _shrunk_taps(spec, taps: list[int], counts: list[int], max_layers: int) -> tuple[list[int], list[int]]:
    """The stage counts and taps of the model shrunk to `max_layers`; a PlanError at the spec's
    model.num_layers, naming the option, when the shrunk model cannot hold the spec's taps apart
    on their own stages (exit 2)."""
    new = _shrink_counts(counts, max(max_layers, len(counts)))
    placed = _remap_taps(taps, counts, new) if taps else []
    if placed is not None:
        return new, placed
    fits = next((n for n in range(max_layers + 1, sum(counts))
                 if _remap_taps(taps, counts, _shrink_counts(counts, n)) is not None), sum(counts))
    raise PlanError.single(spec, ("model", "num_layers"), f"simulate --max-layers {max_layers}: a model of {sum(new)} layers cannot "
                         f"hold the spec's {len(taps)} taps {list(taps)} apart, each on the stage "
                         f"that owns it (layers per stage {counts} -> {new}); use --max-layers "
                         f"{fits} or more")


def sim_spec(spec, *, requests: int, max_layers: int,
             timeout_s: float | None = None) -> tuple[dict, list[str], int]:
    """The sim's spec data and what was changed; also the number of replicas."""
    # Only the keys the user wrote: a default written out would count as written, and a
    # written sync.policy or pipeline knob replaces a `behaviour: engine` spec's own choices.
    data = spec.model_dump(mode="json", exclude_none=True, exclude_unset=True)
    data["behaviour"] = spec.behaviour
    shrunk: list[str] = []
    topo, model, sp = data["topology"], data["model"], data.setdefault("speculative", {})
    # The device stays (an engine's behaviour depends on it); the ranks run on the CPU (gloo).
    topo["backend"] = "gloo"
    heads = max(4, convention(spec.engine, spec.engine_version).attention_tp(spec.topology))
    hidden = heads * HEAD_DIM
    if model["hidden_size"] != hidden:
        shrunk.append(f"hidden {model['hidden_size']} -> {hidden}")
    if model["vocab_size"] > SIM_VOCAB:
        shrunk.append(f"vocab {model['vocab_size']} -> {SIM_VOCAB}")
    model.update(hidden_size=hidden, vocab_size=min(model["vocab_size"], SIM_VOCAB))
    counts = _partition(spec)
    taps = list(spec.speculative.taps(spec.model.num_layers))
    if spec.model.num_layers > max_layers:
        new, placed = _shrunk_taps(spec, taps, counts, max_layers)
        shrunk.append(f"layers {spec.model.num_layers} -> {sum(new)} (stages {counts} -> {new})")
        model["num_layers"] = sum(new)
        if len(counts) > 1:
            model["pp_partition"] = new
        if taps:
            sp["aux_layers"] = placed
            if sp["aux_layers"] != taps:
                shrunk.append(f"taps {taps} -> {sp['aux_layers']}")
    if model.get("moe"):
        moe = model["moe"]
        ep = topo.get("ep", 1)
        experts = min(moe["num_experts"], -(-8 // ep) * ep)  # a multiple of ep, as SGLang needs
        if experts != moe["num_experts"]:
            shrunk.append(f"experts {moe['num_experts']} -> {experts}")
        moe.update(num_experts=experts, top_k=min(moe["top_k"], experts))
    conv = convention(spec.engine, spec.engine_version)
    replicas = conv.num_replicas(spec.topology)
    serving = replicas - 1 if replicas > 1 and spec.sync.idle_ranks == "skip" else replicas
    per_replica = -(-requests // serving)  # (idle_replica: the last may serve none)
    data["runtime"] = {"max_batch": per_replica, "probe_every": 1,
                       "timeout_s": collective_timeout_s(conv.world_size(spec.topology), timeout_s)}
    return data, shrunk, replicas


def compile_data(data: dict, where: Path, source: str | None = None, shrunk: Sequence[str] = ()) -> Plan:
    """Load the sim spec (written as JSON, which YAML reads) and plan it. A spec the changes made
    invalid is refused at `source` (the user's file), saying what the sim changed: no message
    points into the sim's own temporary folder."""
    from specplan.plan.build import compile
    from specplan.schema import load_spec

    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{data['name']}.sim.yaml"
    path.write_text(json.dumps(data, indent=1))
    try:
        return compile(load_spec(path))
    except UserError as exc:
        changed = f" (simulate's CPU model: {'; '.join(shrunk)})" if shrunk else " (simulate's CPU model)"
        raise PlanError([Diagnostic(source or data["name"], None, None, d.path, d.message + changed)
                         for d in exc.diagnostics]) from None


def prepare(spec, where: Path, *, requests: int, max_layers: int, seed: int,
            timeout_s: float | None = None) -> Prepared:
    data, shrunk, replicas = sim_spec(spec, requests=requests, max_layers=max_layers, timeout_s=timeout_s)
    plan = compile_data(data, where, spec.where()[0], shrunk)
    m, sp = plan.model, plan.speculative
    heads = m.hidden_size // HEAD_DIM
    model = {"num_layers": m.num_layers, "hidden": m.hidden_size, "vocab": m.vocab_size,
             "heads": heads, "head_dim": HEAD_DIM, "ffn": 2 * m.hidden_size,
             "num_experts": m.moe.num_experts if m.moe else 0, "top_k": m.moe.top_k if m.moe else 0,
             "taps": list(sp.taps), "seed": seed}
    if (idle := idle_replica(plan)) is not None:
        shrunk.append(f"replica {idle} serves no request, to run its idle program (sync.idle_ranks: skip)")
    return Prepared(data, plan, model, replicas, shrunk)


def idle_replica(plan) -> int | None:
    """The replica the sim leaves without requests, or None: the last, when the plan gives idle
    DP ranks a program of their own (`sync.idle_ranks: skip`), so a run shows what that program
    does to the peers still serving (check's idle-skip finding: they wait in its skipped
    collectives). Every rank reads it from the plan alike."""
    replicas = plan.family["replica"].num_groups
    if replicas > 1 and any(c.idle_program is not ABSENT for c in plan.rank_classes):
        return replicas - 1
    return None


def foreign(data: dict, where: Path) -> Plan:
    """Another spec of the same world size (one more draft step): a foreign plan."""
    other = json.loads(json.dumps(data))
    other["name"] = data["name"] + "-foreign"
    sp = other["speculative"]
    sp["num_steps"] = sp.get("num_steps", 1) + 1
    sp.pop("num_draft_tokens", None)
    return compile_data(other, where / "foreign")
