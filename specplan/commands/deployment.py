"""A deployment of a prefill and a decode instance as a Target (commands/target.py): both
instances' plans and the KV handoff between them, for every command.

Exit codes as everywhere: 0 done, 3 a finding of severity ERROR (nothing written by compile).
"""

from __future__ import annotations

import json
import shlex
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import click

from specplan.commands.common import dump_json
from specplan.commands.spec_target import SpecTarget
from specplan.commands.target import Pair, Refused, Report, Simulation
from specplan.deploy.handoff import Handoff, plan_handoff
from specplan.deploy.load import InstancePair
from specplan.errors import EXIT_FOUND_PROBLEM, Diagnostic, SpecError

if TYPE_CHECKING:
    from specplan.commands.fit import FittingConsole
    from specplan.commands.target import AnyFinding
    from specplan.deploy.cross_checks import CrossFinding
    from specplan.deploy.simulate import DeployOutcome
    from specplan.ecosystem.nodes import NodeOptions
    from specplan.passes import Planning
    from specplan.plan import Plan
    from specplan.schema.model import Spec
    from specplan.sim.launch import Options
    from specplan.verify.baseline import Baseline
    from specplan.verify.findings import Finding

Own = dict[str, tuple["Plan", list["Finding"]]]  # role -> (its plan, its own findings)


class DeploymentTarget:
    """`pair`: the deployment as deploy/load.py reads it; each instance a SpecTarget of its own
    (`instances`, by role), so its plan is made once for every command."""

    def __init__(self, pair: InstancePair):
        self.pair: InstancePair | None = pair
        self._pair = pair
        self.name = pair.name
        self.spec: Spec | None = None
        # an instance written inside the deployment file has no file of its own
        self.roles = Pair(*(SpecTarget(i.spec, None if i.file == pair.file else i.file)
                            for i in pair.instances))
        self.instances = dict(zip(Pair._fields, self.roles))

    @property
    def where(self) -> str:
        return self._pair.file

    @property
    def plan(self) -> Pair[Plan]:
        return Pair(self.roles.prefill.plan, self.roles.decode.plan)

    @property
    def planning(self) -> Pair[Planning]:
        return Pair(self.roles.prefill.planning, self.roles.decode.planning)

    @cached_property
    def handoff(self) -> Handoff:
        return plan_handoff(self._pair)

    @cached_property
    def _checked(self) -> tuple[list[CrossFinding], Own]:
        """(the findings across the instances, role -> (plan, its own findings))."""
        from specplan.deploy.cross_checks import check_deployment

        own = {role: (t.plan, t.findings()) for role, t in self.instances.items()}
        return check_deployment(self.handoff), own

    # explain
    def refuse_explain(self, *, rank: int | None, picture: str | None) -> None:
        if rank is not None:
            raise click.UsageError("--rank shows one rank of a spec; explain an instance's spec")
        if picture not in (None, "kv"):
            raise SpecError([Diagnostic(self._pair.file, None, None, "", f"--picture {picture} "
                                        "draws one spec; a deployment draws --picture kv (or "
                                        "explain an instance's spec)")])

    def explain_data(self, *, lazy: bool = True) -> dict[str, Any]:
        from specplan.deploy.explain import deployment_data

        return deployment_data(self._pair)

    def print_explain(self, data: dict[str, Any], *, as_json: bool, rank: int | None,
                      all_families: bool, console: FittingConsole | None) -> None:
        from specplan.deploy.explain import render_deployment

        if as_json or console is None:
            dump_json(data)
        else:
            render_deployment(data, console)

    def picture(self, kind: str, fmt: str, family: str | None, out: str | None) -> str | None:
        from specplan.deploy.picture import kv_picture_data
        from specplan.pictures import emit
        from specplan.pictures.kv import RENDER

        return emit(out, RENDER["svg" if fmt == "png" else fmt](kv_picture_data(self._pair, self.handoff)),
                    fmt)

    # check
    def refuse_check(self, fmt: str, *, baseline: bool = False) -> None:
        if fmt in ("sarif", "junit"):
            raise click.UsageError(f"--format {fmt} reports one spec; a deployment prints text "
                                   "or json")

    def findings(self) -> list[AnyFinding]:
        return [f for _, f in self.scoped()]

    def scoped(self) -> list[tuple[str, AnyFinding]]:
        """(where, finding): across the instances, then each instance's role."""
        from specplan.verify.baseline import ACROSS

        cross, own = self._checked
        return [*((ACROSS, f) for f in cross), *((role, f) for role, (_, found) in own.items() for f in found)]

    def new_findings(self, baseline: Baseline) -> list[AnyFinding]:
        return [f for scope, f in self.scoped() if baseline.state(f, scope) == "new"]

    def write_baseline(self, path: str) -> None:
        from specplan.verify.baseline import write_baseline

        write_baseline(path, self.scoped(), self.name)

    def print_check(self, *, fmt: str, severity: str, verbose: bool,
                    baseline: Baseline | None = None) -> None:
        from specplan.commands.common import console
        from specplan.deploy.cross_report import as_json, render

        cross, own = self._checked
        if baseline is not None and fmt != "json":
            _print_against(baseline, self._pair, cross, own, verbose)
        elif baseline is not None:
            data = as_json(*_marked(baseline, cross, own))
            data["absent"] = baseline.absent([], seen={r["id"] for r in _rows(data)})
            dump_json(data)
        elif fmt == "json":
            dump_json(as_json(cross, own))
        else:
            render(self._pair, cross, own, console())

    # compile
    def print_refused(self, console: FittingConsole) -> None:
        from specplan.deploy.cross_report import render

        render(self._pair, *self._checked, console)

    def compiled(self) -> dict[str, Any]:
        """{"prefill": plan, "decode": plan, "kv_handoff": [...]}."""
        _, own = self._checked
        return {**{role: built for role, (built, _) in own.items()},
                "kv_handoff": self.handoff.entries}

    def write(self, out: Path, *, runtime: bool) -> Iterator[str]:
        """<out>/<role>/plan.json per instance (with `runtime`, its runtime module beside it),
        then <out>/kv_handoff.json: the handoff beside the fingerprints of the plans it pairs.
        Every file or none, as for one spec: a failure leaves `out` as it was."""
        from specplan.commands.spec_target import write_runtime_module
        from specplan.io.files import staged_dir, write_atomic
        from specplan.lower import write_plan

        _, own = self._checked
        notes: dict[str, str] = {}
        with staged_dir(out, replaces="runtime_*.py" if runtime else None) as stage:
            for role, (built, _) in own.items():
                write_plan(built, stage / role)
                if runtime:
                    notes[role] = write_runtime_module(built, stage / role)
            write_atomic(stage / "kv_handoff.json", json.dumps(self._handoff_data(), indent=1) + "\n",
                         what="the KV handoff")
        for role, (built, _) in own.items():
            yield (f"wrote {out / role / 'plan.json'} ({role}: fingerprint {built.fingerprint[:16]}, "
                   f"{len(built.rank_classes)} rank classes)")
            if role in notes:
                yield notes[role].format(out=out / role)
        yield f"wrote {out / 'kv_handoff.json'} ({len(self.handoff.entries)} decode ranks)"

    def _handoff_data(self) -> dict[str, Any]:
        dep, (_, own) = self._pair, self._checked
        return {"name": dep.name, "connector": dep.connector, "rules": _rules(self.handoff),
                "fingerprints": {role: built.fingerprint for role, (built, _) in own.items()},
                "kv_handoff": self.handoff.entries}

    # export
    def refuse_export(self, engine: str | None, version: str | None) -> None:
        if engine or version:
            raise click.UsageError("--engine and --engine-version apply to one spec; a deployment "
                                   "exports each instance on its own engine and release")

    def export(self, engine: str | None = None, version: str | None = None,
               nodes: NodeOptions | None = None) -> str:
        """One launch script per instance, each with its role and connector flags; an instance
        on more than one node (or every instance, with `nodes`): one line per node."""
        from specplan.ecosystem.export import export as export_spec, render
        from specplan.schema.model import Disaggregation

        if engine is not None or version is not None:
            raise ValueError("a disaggregated deployment exports each instance on its own "
                             "engine; call export() without an engine")
        dep, parts = self._pair, []
        for inst in dep.instances:
            dis = Disaggregation.model_validate({"role": inst.role, "connector": dep.connector})
            spec = inst.spec.model_copy(update={"disaggregation": dis})
            plan_path = f"build/{dep.name}/{inst.role}/plan.json"
            how = f"specplan compile {shlex.quote(str(dep.file))} -o build/{dep.name}"
            if nodes is not None or spec.topology.nodes > 1:
                parts.append(f"# {inst.role} instance ({inst.file})\n"
                             + _per_node(spec, nodes, plan_path, how))
                continue
            launch = export_spec(spec, plan_path=plan_path)
            if launch.plan_path:  # where `specplan compile DEPLOYMENT` writes each instance's plan
                launch.plan_how = how
            parts.append(f"# {inst.role} instance ({inst.file})\n" + render(launch))
        return ("---\n" if nodes is not None and nodes.fmt == "lws" else "\n").join(parts)

    # simulate
    def refuse_simulation(self, sim: Simulation) -> None:
        from specplan.deploy.simulate import INJECTIONS
        from specplan.sim.bounds import check_options, gate_refusal, is_gate

        if sim.inject not in (None, *INJECTIONS) and not is_gate(sim.inject):
            raise SpecError([Diagnostic(self._pair.file, None, None, "", f"--inject {sim.inject} "
                                        "is for one spec; a deployment takes --inject "
                                        f"{', '.join(INJECTIONS)} or gate:<name>")])
        gates = tuple(dict.fromkeys(g.name for built in self.plan for g in built.gates))
        why = gate_refusal(sim.inject or "", gates)  # either instance's gates
        if why:
            raise SpecError([Diagnostic(self._pair.file, None, None, "", why)])
        for built in self.plan:  # each instance's width, as for one spec
            check_options(rounds=sim.rounds, requests=sim.requests,
                          width=built.speculative.num_draft_tokens)

    def print_not_simulated(self, refused: Refused, *, as_json: bool,
                            console: FittingConsole) -> None:
        self.print_refused(console)
        console.print("not simulated: `specplan check` predicts the failures above; run with "
                      "--allow-errors to watch them happen")

    def simulate(self, sim: Simulation, console: FittingConsole) -> int:
        """Run, report, exit code."""
        from specplan.deploy.simulate import simulate as run, verdict
        from specplan.sim.report import render

        out = run(self._pair, _options(sim))
        v = verdict(out)
        assert out.handoff is not None, "a deployment's run hands the KV off"
        console.print(f"handoff: {len(out.transfers)} point-to-point KV transfers from "
                      f"{out.handoff.prefill.num_ranks} prefill ranks to "
                      f"{out.handoff.decode.num_ranks} decode ranks ({_rules(out.handoff)})"
                      + (f", inject {sim.inject}" if sim.inject else ""), markup=False)
        render(out, v, console)
        if v.ok:
            return 0
        internal = [(role, r, x["error"]) for role, res in (("prefill", out.prefill), ("decode", out.results))
                    for r, x in res.items() if x.get("known") is False]
        for role, r, error in internal:
            console.print(f"{role} rank {r} hit an internal error:\n{error}", markup=False)
        return 1 if internal and not sim.inject else EXIT_FOUND_PROBLEM

    def simulated(self, sim: Simulation) -> Report:
        from specplan.deploy.simulate import simulate as run, verdict

        out = run(self._pair, _options(sim))
        v = verdict(out)
        return Report(v.ok, tuple(v.problems), v.checked, v.agreed,
                      len(out.prefill) + len(out.results), sim.rounds, out.wall_s)


def _rules(handoff: Handoff) -> str:
    """The engine function whose rules the handoff follows (engines/handoff.py HandoffRules)."""
    function: str = getattr(handoff.rules, "function")  # noqa: B009 (Handoff.rules is an object)
    return function


def _options(sim: Simulation) -> Options:
    from specplan.sim.launch import Options

    return Options(rounds=sim.rounds, requests=sim.requests, seed=sim.seed,
                   max_layers=sim.max_layers, inject=sim.inject or "", timeout_s=sim.timeout_s)


def _per_node(spec: Spec, nodes: NodeOptions | None, plan_path: str, how: str) -> str:
    """An instance's lines, one per node (NodeOptions `nodes`, default: the engine's)."""
    from specplan.ecosystem.nodes import NodeOptions
    from specplan.ecosystem.nodes_export import export_nodes

    return export_nodes(spec, None, None, nodes or NodeOptions(), plan_path, how)


def _marked(baseline: Baseline, cross: list[CrossFinding],
            own: Own) -> tuple[list[_Marked], dict[str, tuple[Plan, list[_Marked]]]]:
    """Every finding as its JSON with its id and `baseline` state (new or unchanged)."""
    from specplan.verify.baseline import ACROSS, finding_id

    def mark(scope: str, found: Sequence[AnyFinding]) -> list[_Marked]:
        return [_Marked({"id": finding_id(f, scope), **f.to_dict(), "baseline": baseline.state(f, scope)})
                for f in found]

    return mark(ACROSS, cross), {role: (built, mark(role, found)) for role, (built, found) in own.items()}


def _print_against(baseline: Baseline, pair: InstancePair, cross: list[CrossFinding], own: Own,
                   verbose: bool) -> None:
    """Text against a baseline: each instance's new findings as `check SPEC --baseline` prints
    them, then the new ones across the instances, one wrapped line each."""
    from specplan.commands.fit import echo
    from specplan.verify.baseline import ACROSS
    from specplan.verify.formats import render_text, terminal_width
    from specplan.verify.report import subject_of

    width = terminal_width()
    for role, (built, found) in own.items():
        new = baseline.new(found, role)
        echo(f"{role}: {pair.prefill.file if role == 'prefill' else pair.decode.file}")
        echo(render_text(subject_of(built), new, width=width, verbose=verbose,
                         baselined=len(found) - len(new)), nl=False)
    new = baseline.new(cross, ACROSS)
    echo(f"across the instances: {len(new)} new, {len(cross) - len(new)} in the baseline")
    for f in new:
        echo(f"{f.severity:<5} {f.kind}  {f.message}; fix: {f.fix}")


class _Marked(dict[str, Any]):
    """A finding as JSON already (cross_report.as_json calls to_dict on each)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def _rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [*data["findings"], *(r for found in data["instances"].values() for r in found)]
