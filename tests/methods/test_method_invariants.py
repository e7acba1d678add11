"""Invariants every method record keeps, checked over the whole catalog.

These are the rules the planner relies on: sites and decisions point at each other, presets
follow SGLang's table (reference/decisions.md §0.1) or the nature rule, phases run in order,
shapes evaluate.
"""

import ast
import re
from pathlib import Path

import pytest

from specplan.methods import METHODS, get_method
from specplan.methods.base import DTYPE_BYTES, eval_dim, nbytes

SYMBOLS = {"bs": 256, "num_steps": 3, "topk": 4, "num_draft_tokens": 8, "vocab": 1000,
           "hidden": 64}
CHAIN = {"bs": 1, "num_steps": 1, "topk": 1, "num_draft_tokens": 2, "vocab": 8, "hidden": 8}

# SpecTpSync sites and their presets besides "all" (decisions.md §0.1).
SGLANG_PRESETS = {
    "dspark_mem": {"init", "rng"}, "dspark_plan": set(), "dspark_accept_greedy": set(),
    "dspark_accept_sample": {"rng"}, "dspark_target": {"rng"}, "dspark_draft": set(),
    "dflash_mem": {"init", "rng"}, "dflash_accept_sample": {"rng"},
    "dflash_accept_greedy": set(), "dflash_target": {"rng"},
}
NATURE_PRESETS = {"float": set(), "rng": {"rng"}, "host": {"rng"}}
COMPUTES = {None, "target_prefill", "draft_forward", "target_verify", "draft_extend"}
SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
ALLOWED_IMPORTS = {"__future__", "ast", "collections", "dataclasses", "math", "typing"}

# Every method, and each other shape of it an engine runs (Method.variants: the chain ngram).
ALL = sorted(METHODS.items()) + [(n, v) for n, m in sorted(METHODS.items())
                                 for e, v in sorted(m.variants.items())]
IDS = [n for n, _ in sorted(METHODS.items())] + [f"{n}@{e}" for n, m in sorted(METHODS.items())
                                                 for e in sorted(m.variants)]


def _phase_names(method):
    return {p.name for p in method.prefill} | {p.name for p in method.decode}


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_names_unique_and_snake_case(name, method):
    decisions = [d.name for d in method.decisions]
    sites = [s.name for s in method.sites]
    assert len(set(decisions)) == len(decisions)
    assert len(set(sites)) == len(sites)
    for word in decisions + sites + [p.name for p in method.prefill + method.decode]:
        assert SNAKE.match(word), word
    assert name == method.name


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_site_names_follow_sglang_or_method_phase(name, method):
    for site in method.sites:
        assert site.name.startswith(f"{name}_"), site.name
        assert site.name in SGLANG_PRESETS or site.name == f"{name}_{site.phase}", site.name


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_every_nondeterministic_decision_has_a_site_that_lists_it(name, method):
    sites = {s.name: s for s in method.sites}
    for d in method.decisions:
        if d.nature == "deterministic":
            assert d.site is None, d.name
            assert d.derives, f"{d.name} derives nothing"
            continue
        assert d.site in sites, d.name
        assert d.name in sites[d.site].decisions, d.name
        assert sites[d.site].phase == d.phase, d.name


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_every_site_decision_exists_and_points_back(name, method):
    for site in method.sites:
        assert site.decisions, site.name
        for decision in site.decisions:
            assert method.decision(decision).site == site.name


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_presets_follow_sglang_table_or_nature(name, method):
    for site in method.sites:
        if site.name in SGLANG_PRESETS:
            assert set(site.presets) == SGLANG_PRESETS[site.name], site.name
            continue
        natures = {method.decision(d).nature for d in site.decisions}
        assert len(natures) == 1, site.name
        assert set(site.presets) == NATURE_PRESETS[natures.pop()], site.name


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_startup_sites_take_the_min_of_host_state(name, method):
    for site in method.sites:
        decisions = [method.decision(d) for d in site.decisions]
        if not site.startup:
            assert site.kind == "broadcast" and site.phase != "startup"
            continue
        assert site.kind == "min" and site.phase == "startup"
        assert set(site.presets) == {"init", "rng"}
        assert all(d.nature == "host" for d in decisions)


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_decision_phases_exist_and_list_their_decisions(name, method):
    phases = {}
    for phase in method.prefill + method.decode:
        phases.setdefault(phase.name, set()).update(phase.decisions)
    for d in method.decisions:
        if d.phase == "startup":
            continue
        assert d.phase in phases, d.name
        assert d.name in phases[d.phase], d.name
    listed = set().union(*phases.values())
    assert listed <= {d.name for d in method.decisions}


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_phase_names_unique_within_prefill_and_decode(name, method):
    for phases in (method.prefill, method.decode):
        names = [p.name for p in phases]
        assert len(set(names)) == len(names)


@pytest.mark.parametrize(("name", "method"), [m for m in ALL if m[0] != "none"],
                         ids=[n for n in IDS if n != "none"])
def test_decode_phases_run_in_round_order(name, method):
    order = [p.name for p in method.decode]
    at = order.index
    assert at("draft") < at("target_verify") < at("accept") < at("commit")
    assert at("plan_verify") < at("target_verify")
    if "draft_extend" in order:
        assert order[-1] == "draft_extend"
    assert method.prefill[0].compute == "target_prefill"


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_phase_computes_and_stages(name, method):
    for phase in method.prefill + method.decode:
        assert phase.compute in COMPUTES, phase.compute
        drafter_work = phase.compute in ("draft_forward", "draft_extend")
        assert phase.stage == ("last" if drafter_work else "all"), phase.name
        for expr in (phase.tokens_per_request, phase.forwards):
            assert eval_dim(expr, SYMBOLS) >= 0
        if phase.compute is not None:
            assert eval_dim(phase.forwards, SYMBOLS) >= 1 or phase.name == "draft"


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
@pytest.mark.parametrize("symbols", [SYMBOLS, CHAIN], ids=["tree", "chain"])
def test_shapes_evaluate(name, method, symbols):
    for d in method.decisions:
        assert d.dtype in DTYPE_BYTES
        assert all(eval_dim(dim, symbols) >= 0 for dim in d.shape), d.name
        assert nbytes([eval_dim(x, symbols) for x in d.shape], d.dtype) >= 0


@pytest.mark.parametrize(("name", "method"), ALL, ids=IDS)
def test_sites_share_one_path_and_path_sites_match(name, method):
    for site in method.sites:
        paths = {method.decision(d).path for d in site.decisions}
        assert len(paths) == 1, site.name
        if site.name.endswith("_greedy"):
            assert paths == {"greedy"}
        if site.name.endswith("_sample"):
            assert paths == {"sampling"}


def _site_bytes(method, site_name, symbols):
    site = method.site(site_name)
    return sum(nbytes([eval_dim(x, symbols) for x in method.decision(d).shape], method.decision(d).dtype)
               for d in site.decisions)


@pytest.mark.parametrize("site", ["dspark_accept_greedy", "dspark_accept_sample"])
def test_dspark_accept_bytes(site):
    assert _site_bytes(get_method("dspark"), site, {**SYMBOLS, "bs": 256}) == 256 * (4 + 8 + 4)


def test_eagle_accept_bytes():
    symbols = {**SYMBOLS, "bs": 2, "num_steps": 3, "num_draft_tokens": 4}
    # predict [bs*N] + accept_index [bs, S+1] + num_correct_drafts [bs], all int32
    assert _site_bytes(get_method("eagle"), "eagle_accept", symbols) == 4 * (8 + 8 + 2)


def test_tree_only_marks_only_the_eagle_topology():
    for name, method in ALL:
        marked = {d.name for d in method.decisions if d.tree_only}
        family = name in ("eagle", "eagle3", "mtp", "standalone")
        assert marked == ({"parent_list", "top_scores_index"} if family else set()), name


def test_methods_import_only_stdlib_and_each_other():
    root = Path(__import__("specplan.methods").methods.__file__).parent
    for path in root.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                assert {a.name.split(".")[0] for a in node.names} <= ALLOWED_IMPORTS, path
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] in ALLOWED_IMPORTS, path
