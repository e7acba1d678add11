"""Mutations of valid plans, each caught by verify(); every planner plan verifies clean.

Base plans are compiled in-process from a handful of specs (pp 1/2/3, DP-attention with MoE,
greedy and sampling, several methods). Each operator edits a copy of plan.json the way a
planner bug or a hand edit would; the verifier must answer with a new ERROR (or, for a float
decision left unconverged, at least a WARN on that site).
"""

from __future__ import annotations

import copy
import itertools
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specplan import compile
from specplan.plan import PlanFileError, PlanView, load_plan
from specplan.schema import load_spec
from specplan.verify import Finding
from specplan.verify import verify as verify_plan

BASES = {
    "eagle3-vllm-tp2-pp2-sampling": """
name: m1
engine: vllm
topology: {tp: 2, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512}
speculative: {method: eagle3, num_steps: 2, sampling: sampling}
""",
    "eagle-sglang-tp2-pp3-greedy-column": """
name: m2
engine: sglang
topology: {tp: 2, pp: 3, device: cpu}
model: {num_layers: 9, hidden_size: 64, vocab_size: 512}
speculative: {method: eagle, num_steps: 3, topk: 1, sampling: greedy}
sync: {policy: all}
pipeline: {relay: column}
""",
    "dspark-sglang-dpattn-moe-sampling": """
name: m3
engine: sglang
topology: {tp: 4, dp: 2, dp_attention: true, ep: 4, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}
speculative: {method: dspark, num_steps: 3, sampling: sampling, aux_layers: [1, 3, 5]}
""",
    "mtp-sglang-dpattn-moe-pp2-greedy": """
name: m4
engine: sglang
topology: {tp: 4, dp: 2, dp_attention: true, ep: 4, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}
speculative: {method: mtp, num_steps: 2, topk: 1, sampling: greedy}
sync: {policy: all}
""",
    "dflash-sglang-tp2-sampling": """
name: m5
engine: sglang
topology: {tp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512}
speculative: {method: dflash, num_steps: 3, sampling: sampling, aux_layers: [1, 3, 5]}
""",
    "dspark-vllm-tp2-pp2-mixed-ring": """
name: m6
engine: vllm
topology: {tp: 2, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512}
speculative: {method: dspark, num_steps: 3, sampling: mixed, aux_layers: [1, 3, 5]}
pipeline: {relay: ring}
""",
}
QUICK = settings(max_examples=int(os.environ.get("SPECPLAN_MUTATION_EXAMPLES", "12")), deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.function_scoped_fixture])


@lru_cache(maxsize=None)
def _bases() -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as root:
        out = {}
        for name, text in BASES.items():
            path = Path(root) / f"{name}.yaml"
            path.write_text(text)
            out[name] = compile(load_spec(str(path))).to_json()
        return out


def verify(data: dict) -> list[Finding]:
    """Findings on an edited plan.json; the loader's refusal of a dangling reference counts as
    one (trusted: the fingerprint check would refuse every edit before the verifier saw it)."""
    try:
        return verify_plan(load_plan(data, trusted=True))
    except PlanFileError as exc:
        return [Finding(severity="ERROR", message=str(exc), fix="")]


def view_of(data: dict) -> PlanView:
    return PlanView(load_plan(data))


@pytest.fixture(scope="module")
def bases() -> dict[str, dict]:
    return _bases()


def _keys(findings, severities=("ERROR",)) -> set:
    return {(f.severity, f.site, f.decision, f.message) for f in findings if f.severity in severities}


def _new(before: dict, after: dict, severities=("ERROR",)) -> set:
    return _keys(verify(after), severities) - _keys(verify(before), severities)


def test_bases_are_clean(bases):
    """Clean but for SGLang's launch refusals (m3: DSpark at attn_tp 2; m4: PP with
    DP-attention), which every mutant keeps too, so they never count as a mutant's finding."""
    for name, plan in bases.items():
        refused = plan.get("launch_refusal")
        errors = [f for f in verify(plan) if f.severity == "ERROR"]
        assert [f.message for f in errors] == ([f"sglang refuses to launch this topology: {refused}"]
                                              if refused else []), name


def _pick(data, items, label):
    assert items, label
    return data.draw(st.sampled_from(items), label=label)


def _base(data) -> tuple[str, dict]:
    """A base plan the test draws: its name and its plan.json."""
    bases = _bases()
    name = _pick(data, sorted(bases), "base")
    return name, bases[name]


# --- drop a converge -------------------------------------------------------------------------

@QUICK
@given(data=st.data())
def test_drop_a_converge(data):
    name, plan = _base(data)
    sites = [s["name"] for s in plan["sites"] if s["converge"] and not s["trivial"]
             and s["kind"] == "broadcast" and _stage_spread(plan, s)]
    if not sites:
        return
    site = _pick(data, sites, "site")
    mutant = copy.deepcopy(plan)
    entry = next(s for s in mutant["sites"] if s["name"] == site)
    entry["converge"] = False
    natures = {_effective(plan, site, d["nature"]) for d in entry["decisions"]}
    found = verify(mutant)
    on_site = {f.severity for f in found if f.site == site} - {
        f.severity for f in verify(plan) if f.site == site}
    if "rng" in natures:
        assert "ERROR" in on_site, (name, site)
    elif natures - {"deterministic"}:
        assert on_site & {"ERROR", "WARN"}, (name, site)


def _stage_spread(plan: dict, site: dict) -> bool:
    """A converge matters when its group has more than one member reading the value."""
    return view_of(plan).families[site["family"]].group_size > 1


def _effective(plan: dict, site: str, nature: str) -> str:
    b = plan["behaviour"]
    if nature == "rng" and (b.get("rng_is_float") or site in b.get("lockstep_sites", ())):
        return "float"
    return nature


# --- change a width --------------------------------------------------------------------------

def _shared_ops(plan: dict) -> list[tuple[int, str, int]]:
    """(class, round, index) of ops whose group holds ranks of another class."""
    view = view_of(plan)
    out = []
    for ci, cls in enumerate(plan["rank_classes"]):
        for rnd, ops in cls["program"].items():
            for i, op in enumerate(ops):
                if _crosses(view, op):
                    out.append((ci, rnd, i))
    return out


def _crosses(view: PlanView, op: dict) -> bool:
    if op["op"] in ("send", "recv", "ring"):
        return True
    stage_of = view.stages
    return any(len({stage_of[r] for r in g}) > 1 for g in view.groups(op["family"])[:1])


@QUICK
@given(data=st.data(), delta=st.sampled_from([8, -8, 4096]))
def test_change_an_op_width(data, delta):
    name, plan = _base(data)
    ops = [(c, r, i) for c, r, i in _shared_ops(plan)
           if plan["rank_classes"][c]["program"][r][i].get("bytes")]
    if not ops:
        return
    c, r, i = _pick(data, ops, "op")
    mutant = copy.deepcopy(plan)
    mutant["rank_classes"][c]["program"][r][i]["bytes"] += delta
    assert _new(plan, mutant), (name, c, r, i)


@QUICK
@given(data=st.data())
def test_change_a_boundary_buffer(data):
    name, plan = _base(data)
    bounds = [b["id"] for b in plan["boundaries"] if b["op"] == "broadcast"]
    if not bounds:
        return
    bid = _pick(data, bounds, "boundary")
    mutant = copy.deepcopy(plan)
    next(b for b in mutant["boundaries"] if b["id"] == bid)["buffer_bytes"] += 8
    assert _new(plan, mutant), (name, bid)


# --- reorder two collectives on one rank class -------------------------------------------------

def _swappable(plan: dict) -> list[tuple[int, str, int, int]]:
    view = view_of(plan)
    out = []
    for ci, cls in enumerate(plan["rank_classes"]):
        for rnd, ops in cls["program"].items():
            shared = [i for i, op in enumerate(ops) if _crosses(view, op)]
            for a, b in itertools.combinations(shared, 2):
                if _sig(ops[a]) != _sig(ops[b]):
                    out.append((ci, rnd, a, b))
    return out


def _sig(op: dict) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in op.items()))


@QUICK
@given(data=st.data())
def test_reorder_two_collectives(data):
    name, plan = _base(data)
    pairs = _swappable(plan)
    if not pairs:
        return
    c, r, a, b = _pick(data, pairs, "pair")
    mutant = copy.deepcopy(plan)
    ops = mutant["rank_classes"][c]["program"][r]
    ops[a], ops[b] = ops[b], ops[a]
    assert _new(plan, mutant), (name, c, r, a, b)


# --- remove a relay ------------------------------------------------------------------------------

@QUICK
@given(data=st.data())
def test_remove_a_relay(data):
    name, plan = _base(data)
    relays = [i for i, r in enumerate(plan["pipeline"]["relay"]["sites"])
              if view_of(plan).sites[r["site"]]["readers"] == "all_stages"]
    if not relays:
        return
    i = _pick(data, relays, "relay")
    mutant = copy.deepcopy(plan)
    del mutant["pipeline"]["relay"]["sites"][i]
    assert _new(plan, mutant), (name, i)


# --- move a tap ----------------------------------------------------------------------------------

@QUICK
@given(data=st.data(), how=st.sampled_from(["other", "none", "twice"]))
def test_move_a_tap(data, how):
    name, plan = _base(data)
    taps = list(range(len(plan["pipeline"]["taps"])))
    pp = plan["widths"]["pp"]
    if not taps or (pp == 1 and how != "none"):
        return
    i = _pick(data, taps, "tap")
    mutant = copy.deepcopy(plan)
    entry = mutant["pipeline"]["taps"][i]
    owner = entry["producers"][0]
    entry["producers"] = {"other": [(owner + 1) % pp], "none": [],
                          "twice": sorted({owner, (owner + 1) % pp})}[how]
    assert _new(plan, mutant), (name, i, how)


# --- widen a group -------------------------------------------------------------------------------

@QUICK
@given(data=st.data())
def test_widen_a_group(data):
    name, plan = _base(data)
    view = view_of(plan)
    wide = [f["name"] for f in plan["families"] if view.spans_replicas(f["name"])]
    sites = [s["name"] for s in plan["sites"] if s["converge"] and s["kind"] == "broadcast"]
    if not wide or not sites:
        return
    family, site = _pick(data, wide, "family"), _pick(data, sites, "site")
    mutant = copy.deepcopy(plan)
    entry = next(s for s in mutant["sites"] if s["name"] == site)
    entry.update(family=family, source_member=0, trivial=False)
    assert _new(plan, mutant), (name, site, family)


def test_widen_replica_to_tp_under_dp_attention(bases):
    plan = bases["dspark-sglang-dpattn-moe-sampling"]
    mutant = copy.deepcopy(plan)
    entry = next(s for s in mutant["sites"] if s["name"] == "dspark_accept_sample")
    entry["family"] = "tp"
    new = _new(plan, mutant)
    assert any("span several replicas" in m for *_, m in new), new
