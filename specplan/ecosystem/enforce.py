"""`specplan enforce`: from what `check` found on a launch line to a deployment that runs safe.

A `behaviour: engine` spec (what `specplan import` writes) models the engine as launched; its
WARN and ERROR findings name the decisions the engine leaves unconverged. enforce writes the same
deployment as `behaviour: specplan` with `sync.policy: safe` (every decision that is not
deterministic converges) and `sync.sites: on` for any warned site the policy would still leave
off, compiles it, and prints the user's own launch line with `SPECPLAN_PLAN=DIR/plan.json` in
front: the specplan plugin then runs the plan's converges inside the engine (docs/engines.md).
Torch-free, like check and the plan.json half of compile. The command (loading, writing,
printing, its exit code) is commands/enforce.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specplan.plan import Plan
from specplan.schema import Spec

@dataclass
class Enforced:
    spec: Spec  # the enforced spec, as DIR/spec.yaml reads
    spec_text: str  # DIR/spec.yaml
    plan: Plan  # DIR/plan.json
    findings: list  # the enforced plan's own findings
    converged: list[str] = field(default_factory=list)  # lines: what the engine did not converge


def _planned(spec: Spec) -> Plan:
    from specplan.plan.build import compile

    return compile(spec)


def warned_sites(plan: Plan, findings: list) -> set[str]:
    """Sites of the WARN and ERROR findings that a converge of that site answers."""
    sites = {s.name: s for s in plan.sites}
    return {f.site for f in findings if f.severity != "INFO" and f.site in sites
            and not sites[f.site].converge}


def enforced_data(spec: Spec, warned: set[str], origin: str) -> tuple[dict, Spec]:
    """The spec data (behaviour specplan, the converging policy) and its Spec, loaded as the
    YAML at `origin` reads."""
    from specplan.ecosystem.yaml_out import reload, spec_data

    data = spec_data(spec)
    data["behaviour"] = "specplan"
    sync = data.setdefault("sync", {})
    if spec.behaviour == "engine":  # the engine's presets and site states model its launch
        sync["policy"] = "safe"
        sync.pop("sites", None)
    new = reload(data, origin)
    left = {s.name for s in _planned(new).sites if not s.converge} & warned
    if left:
        sync["sites"] = {**sync.get("sites", {}), **{name: "on" for name in sorted(left)}}
        new = reload(data, origin)
    return data, new


def enforce(spec: Spec, out: Path) -> Enforced:
    from specplan.ecosystem.yaml_out import to_yaml
    from specplan.verify import verify

    own = _planned(spec)
    warned = warned_sites(own, verify(own))
    data, new = enforced_data(spec, warned, str(out / "spec.yaml"))
    plan = _planned(new)
    header = (f"Written by `specplan enforce` from {spec.line_of()[0]}: the same deployment, "
              "planned by specplan;\nthe specplan plugin runs it inside the engine "
              f"(SPECPLAN_PLAN={out / 'plan.json'}).")
    return Enforced(new, to_yaml(data, header=header), plan, verify(plan), newly_converged(own, plan))


def newly_converged(own: Plan, plan: Plan) -> list[str]:
    """One line per site the plan converges over more than one rank that `own` did not."""
    before = {s.name: s.converge for s in own.sites}
    wide = {f.name for f in plan.families if f.group_size > 1}
    return [f"{s.name} ({', '.join(d.name for d in s.decisions)}) over {s.family}"
            for s in plan.sites if s.converge and s.family in wide and not before.get(s.name)]


def launch_line(spec: Spec, new: Spec, plan_path: Path) -> str:
    """The user's own line with SPECPLAN_PLAN in front; without one, export's script."""
    if spec.engine_args:
        return f"SPECPLAN_PLAN={plan_path} " + " ".join(spec.engine_args) + "\n"
    from specplan.ecosystem.export import export, render

    return render(export(new, plan_path=str(plan_path)))
