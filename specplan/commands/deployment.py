"""What `explain`, `check`, `compile`, `export` and `simulate` do with a deployment (the CLI
hands them over).

Exit codes as everywhere: 0 done, 3 a finding of severity ERROR (nothing written by compile).
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from specplan.deploy.handoff import plan_handoff
from specplan.deploy.load import InstancePair

EXIT_FOUND_PROBLEM = 3


def explain(dep: InstancePair, as_json: bool, console, picture: str | None = None,
            fmt: str = "svg", out: str | None = None) -> int:
    from specplan.deploy.explain import deployment_data, render_deployment

    if picture is not None:
        return _picture(dep, picture, fmt, out)
    data = deployment_data(dep)
    if as_json:
        sys.stdout.write(json.dumps(data, separators=(",", ":")) + "\n")
    else:
        render_deployment(data, console)
    return 0


def _picture(dep: InstancePair, picture: str, fmt: str, out: str | None) -> int:
    from specplan.deploy.picture import kv_picture_data
    from specplan.errors import Diagnostic, SpecError
    from specplan.pictures import emit
    from specplan.pictures.kv import RENDER

    if picture != "kv":
        raise SpecError([Diagnostic(dep.file, None, None, "", f"--picture {picture} draws one "
                                    "spec; a deployment draws --picture kv (or explain an "
                                    "instance's spec)")])
    if emit(out, RENDER["svg" if fmt == "png" else fmt](kv_picture_data(dep, plan_handoff(dep))), fmt):
        print(out)
    return 0


def check(dep: InstancePair, as_json: bool, console) -> int:
    from specplan.deploy.cross_report import as_json as to_json, check_instances, render
    from specplan.deploy.cross_checks import check_deployment

    cross = check_deployment(plan_handoff(dep))
    own = check_instances(dep)
    if as_json:
        sys.stdout.write(json.dumps(to_json(cross, own), separators=(",", ":")) + "\n")
    else:
        render(dep, cross, own, console)
    errors = any(f.severity == "ERROR" for f in cross) or any(
        f.severity == "ERROR" for _, found in own.values() for f in found)
    return EXIT_FOUND_PROBLEM if errors else 0


def compile_(dep: InstancePair, out_dir: str | None, console, write_runtime) -> int:
    """A plan per instance (<out>/<role>/plan.json) and the handoff (<out>/kv_handoff.json)."""
    from specplan.deploy.cross_report import check_instances, render
    from specplan.deploy.cross_checks import check_deployment

    handoff = plan_handoff(dep)
    cross = check_deployment(handoff)
    own = check_instances(dep)
    if any(f.severity == "ERROR" for f in cross) or any(
            f.severity == "ERROR" for _, found in own.values() for f in found):
        render(dep, cross, own, console)
        print("no plan written: the verifier found errors (see `specplan check`)", file=sys.stderr)
        return EXIT_FOUND_PROBLEM
    out = Path(out_dir or f"build/{dep.name}")
    for role, path, built in write_plans(dep, own, handoff, out):
        if role == "kv_handoff":
            print(f"wrote {path} ({len(handoff.entries)} decode ranks)")
            continue
        print(f"wrote {path} ({role}: fingerprint {built.fingerprint[:16]}, "
              f"{len(built.rank_classes)} rank classes)")
        print(write_runtime(built, path.parent))
    return 0


def handoff_data(dep: InstancePair, own: dict, handoff) -> dict:
    """kv_handoff.json: the handoff beside the fingerprints of the plans it pairs."""
    return {"name": dep.name, "connector": dep.connector, "rules": handoff.rules.function,
            "fingerprints": {role: built.fingerprint for role, (built, _) in own.items()},
            "kv_handoff": handoff.entries}


def write_plans(dep: InstancePair, own: dict, handoff, out: Path) -> list[tuple[str, Path, object]]:
    """<out>/<role>/plan.json per instance, then <out>/kv_handoff.json: (role, path, plan)."""
    from specplan.lower import write_plan

    written = [(role, write_plan(built, out / role), built) for role, (built, _) in own.items()]
    path = _write_json(out / "kv_handoff.json", handoff_data(dep, own, handoff))
    return written + [("kv_handoff", path, None)]


def _write_json(path: Path, data: dict) -> Path:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)
    return path


def export(dep: InstancePair) -> str:
    """One launch script per instance, each with its role and connector flags."""
    from specplan.ecosystem.export import export as export_spec, render
    from specplan.schema.model import Disaggregation

    parts = []
    for inst in dep.instances:
        dis = Disaggregation(role=inst.role, connector=dep.connector)
        spec = inst.spec.model_copy(update={"disaggregation": dis})
        launch = export_spec(spec, plan_path=f"build/{dep.name}/{inst.role}/plan.json")
        if launch.plan_path:  # where `specplan compile DEPLOYMENT` writes each instance's plan
            launch.plan_how = f"specplan compile {shlex.quote(str(dep.file))} -o build/{dep.name}"
        parts.append(f"# {inst.role} instance ({inst.file})\n" + render(launch))
    return "\n".join(parts)


def simulate(dep: InstancePair, *, rounds: int, requests: int, seed: int, max_layers: int,
            inject: str | None, allow_errors: bool, console, timeout_s: float | None = None) -> int:
    """The CLI's body for a deployment: refuse what check rejects, run, report, exit code."""
    from specplan.deploy.cross_checks import check_deployment
    from specplan.deploy.cross_report import check_instances, render as render_check
    from specplan.deploy.simulate import INJECTIONS, simulate as run, verdict
    from specplan.errors import Diagnostic, SpecError
    from specplan.sim.launch import Options
    from specplan.sim.report import render

    if not isinstance(dep, InstancePair):
        raise SpecError([Diagnostic(dep.line_of()[0], None, None, "", f"--inject {inject} breaks "
                                    "a deployment's KV handoff; this is one instance's spec (give "
                                    "the deployment, or a spec with disaggregation.peer)")])
    if inject not in (None, *INJECTIONS):
        raise SpecError([Diagnostic(dep.file, None, None, "", f"--inject {inject} is for one "
                                    f"spec; a deployment takes --inject {', '.join(INJECTIONS)}")])
    cross, own = check_deployment(plan_handoff(dep)), check_instances(dep)
    found = list(cross) + [f for _, fs in own.values() for f in fs]
    if not allow_errors and any(f.severity == "ERROR" for f in found):
        render_check(dep, cross, own, console)
        console.print("not simulated: `specplan check` predicts the failures above; run with "
                      "--allow-errors to watch them happen")
        return EXIT_FOUND_PROBLEM
    opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                  inject=inject or "", timeout_s=timeout_s)
    out = run(dep, opt)
    v = verdict(out)
    console.print(f"handoff: {len(out.transfers)} point-to-point KV transfers from "
                  f"{out.handoff.prefill.num_ranks} prefill ranks to "
                  f"{out.handoff.decode.num_ranks} decode ranks ({out.handoff.rules.function})"
                  + (f", inject {inject}" if inject else ""), markup=False)
    render(out, v, console)
    if v.ok:
        return 0
    internal = [(role, r, x["error"]) for role, res in (("prefill", out.prefill), ("decode", out.results))
                for r, x in res.items() if x.get("known") is False]
    for role, r, error in internal:
        console.print(f"{role} rank {r} hit an internal error:\n{error}", markup=False)
    return 1 if internal and not inject else EXIT_FOUND_PROBLEM
