"""`specplan enforce`: from what `check` found on a launch line to a deployment that runs safe.

A `behaviour: engine` spec (what `specplan import` writes) models the engine as launched; its
WARN and ERROR findings name the decisions the engine leaves unconverged. enforce writes the same
deployment as `behaviour: specplan` with `sync.policy: safe` (every decision that is not
deterministic converges) and `sync.sites: on` for any warned site the policy would still leave
off, compiles it, and prints the user's own launch line with `SPECPLAN_PLAN=DIR/plan.json` in
front: the specplan plugin then runs the plan's converges inside the engine (docs/engines.md).
Torch-free, like check and the plan.json half of compile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specplan.plan import Plan
from specplan.schema import Spec

EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM = 2, 3


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


def run(target: str | None, out: str, engine: str | None, line: list[str], environ: dict,
        script: str | None, base: str | None, model_config: str | None,
        name: str | None) -> tuple[int, str, list[str]]:
    """(exit code, stdout text, stderr lines) of `specplan enforce`."""
    from specplan.files import staged_dir, write_atomic
    from specplan.lower import write_plan
    from specplan.schema import load_spec
    from specplan.verify import has_errors
    from specplan.verify.formats import render_text, terminal_width
    from specplan.verify.report import subject_of

    messages: list[str] = []
    if engine is not None:
        spec, messages = _imported(engine, line, environ, script, base, model_config, name)
        if spec is None:
            return EXIT_BAD_INPUT, "", messages
    else:
        spec = load_spec(target)
    out_dir = Path(out)
    done = enforce(spec, out_dir)
    if has_errors(done.findings):
        text = render_text(subject_of(done.plan), done.findings, width=terminal_width(), verbose=False)
        return EXIT_FOUND_PROBLEM, text, messages + [
            "nothing written: even specplan's plan of this deployment has errors (above)"]
    with staged_dir(out_dir) as stage:  # both files or neither
        write_atomic(stage / "spec.yaml", done.spec_text, what="the spec")
        write_plan(done.plan, stage)
    plan_path = out_dir / "plan.json"
    lines = [f"wrote {out_dir / 'spec.yaml'} (behaviour specplan, policy {done.spec.sync.policy})",
             f"wrote {plan_path} (fingerprint {done.plan.fingerprint[:16]}, "
             f"{len(done.plan.boundaries)} converge boundaries)"]
    if done.converged:
        lines.append(f"the plan converges what {spec.engine} did not:")
        lines += [f"  {item}" for item in done.converged]
    else:
        lines.append("the plan converges nothing the spec's own plan did not")
    warns = sum(1 for f in done.findings if f.severity == "WARN")
    if warns:
        lines.append(f"{warns} WARN remain that no converge answers: specplan check {plan_path}")
    lines.append("launch (the specplan plugin loads the plan):")
    return 0, "\n".join(lines) + "\n" + launch_line(spec, done.spec, plan_path), messages


def _imported(engine, line, environ, script, base, model_config, name):
    """The spec `specplan import` makes of a launch line, or None and import's messages."""
    from specplan.ecosystem.import_cli import run_import
    from specplan.schema.load import load_spec_text

    code, text, messages = run_import(engine, line, environ, script, base, model_config, name, None)
    if code != 0:
        return None, [m.replace("specplan import:", "specplan enforce:", 1) for m in messages]
    return load_spec_text(text, "<the imported launch line>"), messages
