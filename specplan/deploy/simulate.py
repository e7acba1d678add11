"""`specplan simulate DEPLOYMENT`: both instances in one gloo world, the KV handed off by the plan.

The parent (torch-free until the verdict) makes each instance's sim spec (specplan.sim.setup:
CPU, a tiny model), with one model for both: the same layers, hidden size (heads for the
larger attention TP), taps, and `num_kv_heads` equal to the sim's heads (the sim's attention
is MHA, so the plan's KV-head slices are the sim's head slices). It plans the handoff of the
two sim specs (specplan.deploy.handoff, the engines' rules) and turns every decode rank's
entry into point-to-point transfers: one per (decode rank, prefill source rank), holding the
layers that source holds of the entry's `layers` (global ids; the draft ids from the last
prefill stage) and the KV heads both hold of [head_offset, head_offset + head_count). Then it
starts P + D processes (specplan.sim.handoff) and gives the verdict: every decode replica's
ranks agree, greedy tokens equal single-process greedy decoding, and every decode rank's KV
is the prompt's KV (else the report names the first layer that differs).

`--inject layer-map` hands the sim a handoff whose layer mapping is off by one inside each
source's range (the decode slot of layer L receives the prefill's layer L + 1, the last slot
the first): tokens go wrong and the report names the first layer that differs.

`--inject gate` / `gate:<name>` runs each instance's gates as `simulate SPEC` runs one spec's
(sim/gates.py): the prefill ranks take their plan's start-up and prefill gates before the
prefill, the decode ranks their start-up gates after binding and their decode gates in the
first round (a decode instance prefills nothing). A gate its instance's engine leaves to each
rank ends in GateMismatch naming it; specplan's plan of both instances passes.

Worked example: prefill tp 2 x pp 2 (ranks 0-3; 6 layers, stages [0, 3) and [3, 6)) ->
decode tp 1 (world rank 4): transfers from prefill ranks 0, 2 (TP 0, stages 0 and 1; heads
0..1) and 1, 3 (TP 1; heads 2..3), each with its stage's 3 layers; rank 3 (last stage, TP 1)
also sends the draft layer 6, and prefill rank 2 (last stage, TP 0) the first tokens and
the drafter's context.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from itertools import product
from pathlib import Path

from specplan.deploy.handoff import Handoff, plan_handoff
from specplan.deploy.load import InstancePair
from specplan.deploy.pairing import Instance
from specplan.errors import Diagnostic, SpecError
from specplan.sim.bounds import faults, is_gate
from specplan.sim.launch import Outcome

INJECTIONS = faults("deployment", "gates")  # and gate:<name> (is_gate)


@dataclass
class DeployOutcome(Outcome):
    """A simulate Outcome of the decode instance (what the report reads), plus the handoff."""

    prefill: dict[int, dict] = field(default_factory=dict)
    handoff: Handoff | None = None
    transfers: list[dict] = field(default_factory=list)


def _sim_specs(dep: InstancePair, requests: int, max_layers: int,
               timeout_s: float | None = None) -> tuple[dict, dict, list[str]]:
    """Both instances' sim spec data, sharing one model."""
    from specplan.sim.setup import HEAD_DIM, sim_spec

    pre, pre_shrunk, _ = sim_spec(dep.prefill.spec, requests=requests, max_layers=max_layers,
                                  timeout_s=timeout_s)
    dec, dec_shrunk, _ = sim_spec(dep.decode.spec, requests=requests, max_layers=max_layers,
                                  timeout_s=timeout_s)
    heads = max(pre["model"]["hidden_size"], dec["model"]["hidden_size"]) // HEAD_DIM
    shrunk = [f"prefill: {s}" for s in pre_shrunk] + [f"decode: {s}" for s in dec_shrunk]
    if pre["model"]["num_layers"] != dec["model"]["num_layers"]:
        raise SpecError([Diagnostic(dep.file, None, None, "", "the instances' models have "
                                    f"{pre['model']['num_layers']} and {dec['model']['num_layers']} "
                                    "layers; simulate needs one model")])
    for role, data in (("prefill", pre), ("decode", dec)):
        m = data["model"]
        if m.get("attention") == "mla":
            shrunk.append(f"{role}: attention mla -> mha (the sim's model)")
        m.update(hidden_size=heads * HEAD_DIM, num_kv_heads=heads, attention="mha")
        data["name"] = f"{data['name']}-{role}"
        dis = data.get("disaggregation") or {}
        data["disaggregation"] = {"role": role, **({"connector": dis["connector"]}
                                                   if dis.get("connector") else {})}
        data["runtime"]["max_batch"] = requests
    if "aux_layers" in pre["speculative"]:
        dec["speculative"]["aux_layers"] = pre["speculative"]["aux_layers"]
    return pre, dec, shrunk


def prepare(dep: InstancePair, where: Path, *, requests: int, max_layers: int, seed: int,
            timeout_s: float | None = None):
    """Both sim plans, the sim's handoff and the decode Prepared the report reads."""
    from specplan.schema import load_spec
    from specplan.sim.setup import HEAD_DIM, Prepared, compile_data

    pre, dec, shrunk = _sim_specs(dep, requests, max_layers, timeout_s)
    plans, specs = {}, {}
    for role, data in (("prefill", pre), ("decode", dec)):
        plans[role] = compile_data(data, where / role, str(dep.file), shrunk)
        specs[role] = load_spec(where / role / f"{data['name']}.sim.yaml")
        if plans[role].num_worlds > 1:
            raise SpecError([Diagnostic(dep.file, None, None, "", f"the {role} instance runs "
                                        f"{plans[role].num_worlds} independent worlds; simulate "
                                        "runs one world per instance")])
    sim_dep = InstancePair(dep.name, dep.file, Instance("prefill", specs["prefill"]),
                         Instance("decode", specs["decode"]), dep.connector)
    handoff = plan_handoff(sim_dep)
    m, sp = plans["decode"].model, plans["decode"].speculative
    heads = m.hidden_size // HEAD_DIM
    model = {"num_layers": m.num_layers, "hidden": m.hidden_size, "vocab": m.vocab_size,
             "heads": heads, "head_dim": HEAD_DIM, "ffn": 2 * m.hidden_size,
             "num_experts": m.moe.num_experts if m.moe else 0,
             "top_k": m.moe.top_k if m.moe else 0, "taps": list(sp.taps), "seed": seed}
    replicas = plans["decode"].family["replica"].num_groups
    return Prepared(dec, plans["decode"], model, replicas, shrunk), plans, handoff


def transfers(h: Handoff, serves: dict[int, list[int]], inject: str) -> tuple[list[dict], list[dict]]:
    """The point-to-point sends the handoff plan makes: KV transfers and each decode rank's aux
    (first tokens and drafter context from the last prefill stage's TP rank 0)."""
    p = h.prefill
    rank_of = {(dp, tp, cp, pp): r for r, (dp, tp, cp, pp) in
               enumerate(zip(p.dp_of, p.tp_of, p.cp_of, p.pp_of))}
    out, aux = [], []
    for e in h.entries:
        dst = e["decode_rank"]
        if not serves[dst]:  # an idle decode replica: nothing to hand over
            continue
        out += _sources(h, e, rank_of, serves[dst], inject)
        src = rank_of[(e["prefill_dp_rank"], 0, 0, p.pp - 1)]
        aux.append({"src": src, "dst": dst, "dst_world": p.num_ranks + dst, "serves": serves[dst]})
    return out, aux


def _sources(h: Handoff, e: dict, rank_of: dict, serves: list[int], inject: str) -> list[dict]:
    """One decode rank's transfers: per prefill (tp, cp, pp) source, the layers of the entry that
    source's stage holds (draft layers from the last stage) and the KV heads both hold."""
    p, dst = h.prefill, e["decode_rank"]
    drafts = set(h.receipts[h.decode.pp_of[dst]].drafts)
    lo, hi = e["head_offset"], e["head_offset"] + e["head_count"]
    out = []
    for tp, cp, pp in product(e["prefill_tp_ranks"], e["prefill_cp_ranks"], e["prefill_pp_ranks"]):
        p_lo, p_count = p.heads(tp)
        heads = [max(lo, p_lo), min(hi, p_lo + p_count)]
        start, end = p.stages[pp]
        layers = [i for a, b in e["layers"] for i in range(a, b)
                  if start <= i < end and i not in drafts]
        dr = sorted(drafts) if pp == p.pp - 1 else []
        if heads[0] >= heads[1] or not (layers or dr):
            continue
        out.append({"src": rank_of[(e["prefill_dp_rank"], tp, cp, pp)], "dst": dst,
                    "dst_world": p.num_ranks + dst, "serves": serves, "heads": heads,
                    "layers": layers, "drafts": dr, "drafts_src": dr,
                    "layers_src": _wrong(layers) if inject == "layer-map" else layers})
    return out


def _wrong(layers: list[int]) -> list[int]:
    """The injected mapping: slot i reads layer i + 1 of the source's range, the last the first."""
    return layers[1:] + layers[:1]


def simulate(dep: InstancePair, opt, on_round=lambda r: None) -> DeployOutcome:
    from specplan.sim.launch import sim_folder

    with sim_folder("specplan-simdep-", opt.keep) as sim_dir:  # gone on every exit
        return _simulate(dep, opt, on_round, sim_dir)


def _simulate(dep: InstancePair, opt, on_round, sim_dir: Path) -> DeployOutcome:
    from specplan.sim.launch import kill_all, watch

    prep, plans, h = prepare(dep, sim_dir, requests=opt.requests, max_layers=opt.max_layers,
                             seed=opt.seed, timeout_s=opt.timeout_s)
    if h.refusals:
        raise SpecError([Diagnostic(dep.file, None, None, "", "the engines refuse this pairing: "
                                    + "; ".join(r.message for r in h.refusals))])
    dec_plan = plans["decode"]
    replica = dec_plan.family["replica"]
    serves = {r: [q for q in range(opt.requests) if q % replica.num_groups == replica.locate(r)[0]]
              for r in range(dec_plan.world_size)}
    sends, aux = transfers(h, serves, opt.inject)
    pw, dw = plans["prefill"].world_size, dec_plan.world_size
    _write(sim_dir, prep, plans, opt, pw, dw, sends, aux, serves)
    t0 = time.monotonic()
    procs = _start(sim_dir, pw + dw)
    try:
        notes = watch(procs, sim_dir, opt.rounds, on_round,
                      deadline_s=120 + 3.0 * opt.rounds * (pw + dw))
    finally:
        kill_all(procs)
    results = {}
    for rank in range(pw + dw):
        path = sim_dir / f"rank{rank}.json"
        results[rank] = json.loads(path.read_text()) if path.exists() else {
            "rank": rank, "error": _tail(sim_dir / f"rank{rank}.log") or "no result (killed)"}
    return DeployOutcome(prep, opt, {r - pw: x for r, x in results.items() if r >= pw},
                         {r: p.returncode for r, p in enumerate(procs)}, time.monotonic() - t0,
                         sim_dir, notes, prefill={r: x for r, x in results.items() if r < pw},
                         handoff=h, transfers=sends)


def _write(sim_dir: Path, prep, plans, opt, pw: int, dw: int, sends, aux, serves) -> None:
    from specplan.sim.launch import free_port

    paths = {}
    for role, plan in plans.items():
        paths[role] = str(sim_dir / role / "plan.json")
        Path(paths[role]).write_text(plan.dumps())
    sim = {"rounds": opt.rounds, "requests": opt.requests, "seed": opt.seed,
           "inject": opt.inject if is_gate(opt.inject) else "",  # layer-map: made here
           "spec": True, "progress": str(sim_dir / "progress")}
    (sim_dir / "sim.json").write_text(json.dumps({
        "model": prep.model, "sim": sim, "plans": paths, "prefill_world": pw, "decode_world": dw,
        "decode_port": free_port(), "transfers": sends, "aux": aux,
        "serves": {str(r): q for r, q in serves.items()}}))


def _start(sim_dir: Path, world: int):
    from specplan.sim.launch import start

    return start(sim_dir, world, module="specplan.sim.handoff")


def _tail(path: Path) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text().strip().splitlines()[-3:])


def verdict(out: DeployOutcome):
    """The sim's verdict on the decode instance, plus the prefill ranks' failures and every
    decode rank whose KV is not the prompt's (the first layer that differs)."""
    from specplan.sim.report import verdict as sim_verdict

    prefill_failed = [f"prefill rank {r}: {x['error'].splitlines()[0]}"
                      for r, x in sorted(out.prefill.items()) if x.get("error")]
    v = sim_verdict(replace(out, notes=out.notes + prefill_failed))
    for r, x in sorted(out.results.items()):
        diff = x.get("kv_diff")
        if diff:
            like = (f" (it is layer {diff['looks_like']}'s KV)" if diff["looks_like"] is not None
                    else "")
            v.problems.append(f"decode rank {r}: the KV received for {diff['kind']} layer "
                              f"{diff['layer']} differs from the prompt's KV{like}: the handoff's "
                              "layer mapping is wrong")
    v.ok = not v.problems
    return v
