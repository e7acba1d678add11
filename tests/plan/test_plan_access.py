"""Plan content is read through the typed Plan only: no string-key access to it outside
specplan/plan/ (issue 15). An AST walk finds every `x["key"]` and `x.get("key")` whose key is a
plan.json key, in every module that is not the plan's producer (schema/, passes/, ir/ build the
sections the plan is made from). Functions that index other JSON with the same key names (the
explain view, spec data, trace records, sim.json, the guard header) are allowed by name, each
with the reason; anything else is a regression to untyped plan access."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from specplan.plan import artifact, model

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "specplan"
PRODUCERS = ("plan", "schema", "passes", "ir")  # the plan's own module, and what it is built from
PLAN_KEYS = {f.name for m in (model, artifact) for v in vars(m).values()
             if isinstance(v, type) and dataclasses.is_dataclass(v) for f in dataclasses.fields(v)}

NOT_PLAN = {
    # explain_data / round_data output: the JSON view `explain --json` prints, not plan.json
    "views/explain.py::_header": "explain view (built from the mesh)",
    "views/explain.py::_stages": "explain view (built from the mesh)",
    "views/explain.py::_replicas": "explain view (built from the mesh)",
    "views/explain.py::rank_data": "explain view (built from the mesh)",
    "views/explain.py::_render_rank": "explain view (built from the mesh)",
    "commands/spec_target.py::SpecTarget.explain_data": "explain view",
    "commands/spec_target.py::SpecTarget.print_explain": "explain view",
    "deploy/explain.py::instance_data": "explain view of a deployment",
    "deploy/explain.py::render_deployment": "explain view of a deployment",
    "deploy/load.py::_deployment_name": "deployment YAML data",
    "pictures/kv.py::_grid": "explain view of a deployment",
    "pictures/kv.py::render_svg": "explain view of a deployment",
    "pictures/kv.py::render_mermaid": "explain view of a deployment",
    "pictures/kv.py::render_dot": "explain view of a deployment",
    "pictures/kv.py::_drawn": "explain view of a deployment",
    "views/round_view.py::render_round": "round_data output",
    "views/round_view.py::_render_gates": "round_data output",
    "pictures/ranks.py::default_family": "explain view",
    "pictures/ranks.py::_header": "explain view",
    "pictures/ranks.py::render_svg": "explain view",
    "pictures/ranks.py::_legend": "explain view",
    "pictures/ranks.py::render_mermaid": "explain view",
    "pictures/ranks.py::render_dot": "explain view",
    "pictures/round.py::RoundPicture._edges": "IR edge data",
    # a check baseline: findings as JSON (their ids), not plan.json
    "verify/baseline.py::_json_rows": "baseline and check --format json findings",
    "verify/formats.py::_absent_result": "a baseline's finding",
    "commands/deployment.py::DeploymentTarget.print_check": "a deployment's check --format json findings (their ids)",
    # spec data (a topology as plain dicts), engine arguments
    "sim/setup.py::sim_spec": "spec data",
    "sim/setup.py::compile_data": "spec data",
    "sim/setup.py::foreign": "spec data",
    "ecosystem/*": "engine arguments and spec data",
    "schema/behaviour.py::_apply_knobs": "spec data",
    "engines/flag_table.py::flag_table": "an engine's flags/<engine>.json (its program)",
    "mesh/family.py::Family.rule": "a family rule as data",
    "mesh/family.py::from_rule": "a family rule as data",
    # sim.json, timings, trace records, the guard header, rank lists
    "sim/worker.py::_config": "sim.json",
    "sim/handoff.py::prefill_side": "sim.json (transfers, plan paths by role) and result records",
    "sim/handoff.py::receive": "sim.json (transfers, plan paths by role) and result records",
    "sim/handoff.py::decode_side": "sim.json (transfers, plan paths by role) and result records",
    "sim/handoff.py::run": "sim.json (transfers, plan paths by role) and result records",
    "deploy/simulate.py::_sim_specs": "spec data, handoff entries, sim.json and result records",
    "deploy/simulate.py::prepare": "spec data, handoff entries, sim.json and result records",
    "deploy/simulate.py::_simulate": "spec data, handoff entries, sim.json and result records",
    "deploy/simulate.py::verdict": "spec data, handoff entries, sim.json and result records",
    "sim/report.py::_against_reference": "sim.json and timings",
    "sim/report.py::_against_model": "sim.json and timings",
    "sim/report.py::summary": "sim.json and timings",
    "sim/report.py::render": "sim.json and timings",
    "sim/engine.py::Engine.decide": "timings",
    "sim/comm.py::Comm.gather_rows": "rank lists by family",
    "trace/diff.py::_key": "trace records",
    "trace/diff.py::first_batch_divergence": "trace records",
    "trace/diff.py::plans": "trace records (the fingerprint each is stamped with)",
    "trace/diff.py::acceptance": "trace records",
    "trace/read.py::_one_plan": "trace records (the fingerprint each is stamped with)",
    "commands/load.py::load_spec_arg": "a JSON file that may be a plan, read only to say so",
    "commands/import_.py::imported": "engine arguments (a launch line read)",
    "runtime/host_sync.py::_device_to_host": "a torch op's keyword arguments",
    # SGLang's resolved speculative settings, under SPEC_KEYS (an engine dict, not the plan)
    "plugins/sglang.py::SGLangState._engine_spec": "engine settings under SPEC_KEYS",
    "plugins/sglang_sites.py::SiteHooks.schedule_verify_lens": "SGLang's keyword arguments (device)",
}


def _hits(path: Path) -> list[tuple[str, int, str]]:
    """(enclosing qualified name, line, key) of each string-key access to a plan key."""
    out: list[tuple[str, int, str]] = []

    def key_of(node) -> str | None:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return node.slice.value if isinstance(node.slice.value, str) else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            return node.args[0].value
        return None

    def walk(node, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, f"{scope}.{child.name}" if scope else child.name)
                continue
            key = key_of(child)
            if key in PLAN_KEYS:
                out.append((scope or "<module>", child.lineno, key))
            walk(child, scope)

    walk(ast.parse(path.read_text()), "")
    return out


def _allowed(rel: str, scope: str) -> bool:
    folder = rel.split("/")[0] + "/*"
    return f"{rel}::{scope}" in NOT_PLAN or f"{rel}::*" in NOT_PLAN or folder in NOT_PLAN


def test_no_string_key_access_to_plan_content_outside_the_plan_module():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/")[0] in PRODUCERS:
            continue
        found += [f"specplan/{rel}:{line}: [{key!r}] in {scope}" for scope, line, key in _hits(path)
                  if not _allowed(rel, scope)]
    assert not found, "read the typed Plan (specplan.plan) instead:\n" + "\n".join(found)


def test_the_allow_list_names_real_functions():
    """An allow-list entry whose function is gone (or renamed) must go too."""
    stale = []
    for entry in NOT_PLAN:
        if entry.endswith("/*"):
            assert (PACKAGE / entry[:-2]).is_dir(), entry
            continue
        rel, scope = entry.split("::")
        if scope == "*":
            assert (PACKAGE / rel).is_file(), entry
            continue
        if not any(s == scope for s, _, _ in _hits(PACKAGE / rel)):
            stale.append(entry)
    assert not stale, f"allow-listed but no plan-key access there any more: {stale}"
