"""One spec as a Target (commands/target.py): what each command does with a single instance's
plan. A plan.json given to `check` is a PlanTarget, the check half of it."""

from __future__ import annotations

import sys
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import click

from specplan.commands.common import check_release, dump_json
from specplan.commands.target import Refused, Report, Simulation
from specplan.errors import Diagnostic, SpecError
from specplan.verify.findings import Finding

if TYPE_CHECKING:
    from specplan.commands.fit import FittingConsole
    from specplan.deploy import InstancePair
    from specplan.ecosystem.nodes import NodeOptions
    from specplan.passes import Planning
    from specplan.plan import Plan
    from specplan.schema.model import Spec
    from specplan.verify.baseline import Baseline


class PlanTarget:
    """A plan, checked: the plan.json `check` takes, and the base of a spec's target."""

    def __init__(self, plan: Plan | None = None):
        if plan is not None:
            self.plan = plan

    @cached_property
    def plan(self) -> Plan:
        raise NotImplementedError  # a SpecTarget builds it; a PlanTarget is given it

    def refuse_check(self, fmt: str, *, baseline: bool = False) -> None:
        return None  # every format reports one plan, against a baseline or not

    @cached_property
    def _findings(self) -> list[Finding]:
        from specplan.verify import verify

        return verify(self.plan)

    def findings(self) -> list[Finding]:
        return self._findings

    def new_findings(self, baseline: Baseline) -> list[Finding]:
        return baseline.new(self.findings())

    def write_baseline(self, path: str) -> None:
        from specplan.verify.baseline import write_baseline

        write_baseline(path, self.findings(), self.plan.name)

    def print_check(self, *, fmt: str, severity: str, verbose: bool,
                    baseline: Baseline | None = None) -> None:
        """`baseline` (verify/baseline.py Baseline): text shows only the new findings, the
        machine formats mark each finding new or unchanged."""
        from specplan.verify import formats
        from specplan.verify.report import subject_of

        findings = self.findings()
        shown = formats.at_least(findings, severity)
        subject = subject_of(self.plan)
        if fmt == "json":
            text = formats.to_json(shown, baseline)
        elif fmt == "sarif":
            text = formats.to_sarif(subject, shown, baseline)
        elif fmt == "junit":
            text = formats.to_junit(subject, shown, baseline)
        else:
            new = shown if baseline is None else baseline.new(shown)
            filtered = len(findings) if len(shown) != len(findings) else None
            text = formats.render_text(subject, new, width=formats.terminal_width(),
                                       verbose=verbose, shown_of=filtered,
                                       baselined=len(shown) - len(new))
        sys.stdout.write(text)


class SpecTarget(PlanTarget):
    """One spec: `path` is the file it was read from (None for a spec made from a dict)."""

    def __init__(self, spec: Spec, path: str | None):
        super().__init__()
        self.spec: Spec | None = spec
        self._spec = spec
        self.path = path
        self.name = spec.name
        self.pair: InstancePair | None = None

    @property
    def where(self) -> str:
        return self.path or "<dict>"

    @cached_property
    def planning(self) -> Planning:
        from specplan.passes import plan as run_passes

        return run_passes(self._spec)

    @cached_property
    def plan(self) -> Plan:
        from specplan.lower import build_plan

        return build_plan(self.planning)

    # explain
    def refuse_explain(self, *, rank: int | None, picture: str | None) -> None:
        if picture == "kv":
            raise SpecError([Diagnostic(self.where, None, None, "", "--picture kv draws a "
                                        "deployment's KV handoff; this spec has no peer (see "
                                        "disaggregation)")])
        world = self.planning.mesh.world_size
        if rank is not None and not 0 <= rank < world:
            raise SpecError([Diagnostic(self.where, None, None, "", f"--rank {rank} is outside "
                                        f"the world: expected 0 .. {world - 1}")])

    def explain_data(self, *, lazy: bool = True) -> dict[str, Any]:
        from specplan.views.explain import explain_data
        from specplan.views.round_view import round_data

        data = explain_data(self._spec, self.planning.mesh, lazy=lazy)
        data["round"] = round_data(self.plan, lazy=lazy)
        return data

    def print_explain(self, data: dict[str, Any], *, as_json: bool, rank: int | None,
                      all_families: bool, console: FittingConsole | None) -> None:
        from specplan.views.explain import rank_data, render
        from specplan.views.round_view import render_round

        if as_json and rank is not None:
            dump_json(rank_data(data, rank))
            return
        if as_json:  # rows are written as they are made: 1M ranks never sit in memory at once
            from specplan.views.explain_stream import write_json

            write_json(data, sys.stdout.write)
            sys.stdout.write("\n")
            return
        assert console is not None, "tables print through the console"
        render(data, console, rank, all_families)
        if rank is None:
            render_round(data["round"], console, self.plan.pipeline)

    def picture(self, kind: str, fmt: str, family: str | None, out: str | None) -> str | None:
        from specplan.pictures import write_picture

        data = self.explain_data(lazy=False)  # pictures read plain lists
        return write_picture(self.where, kind, fmt, data, self.planning, self.plan, family, out)

    # compile
    def print_refused(self, console: FittingConsole) -> None:
        from specplan.verify.report import render_findings

        render_findings(self.plan, self.findings(), console)

    def compiled(self) -> Plan:
        return self.plan

    def write(self, out: Path, *, runtime: bool) -> Iterator[str]:
        from specplan.io.files import staged_dir
        from specplan.lower import write_plan

        plan = self.plan
        # every file or none: a failure leaves `out` as it was; another plan's module goes
        with staged_dir(out, replaces="runtime_*.py" if runtime else None) as stage:
            write_plan(plan, stage)
            note = write_runtime_module(plan, stage) if runtime else None
        yield (f"wrote {out / 'plan.json'} (fingerprint {plan.fingerprint[:16]}, "
               f"{len(plan.boundaries)} converge boundaries, {len(plan.rank_classes)} rank classes)")
        if note is not None:
            yield note.format(out=out)

    # export
    def refuse_export(self, engine: str | None, version: str | None) -> None:
        if version:
            check_release(engine or self._spec.engine, version)

    def export(self, engine: str | None = None, version: str | None = None,
               nodes: NodeOptions | None = None) -> str:
        """`nodes`: NodeOptions (ecosystem/nodes.py), one line per node; None: one line."""
        from specplan.ecosystem.export import export, render

        if nodes is not None:
            from specplan.ecosystem.nodes_export import export_nodes

            return export_nodes(self._spec, engine, version, nodes)
        return render(export(self._spec, engine, version))

    # simulate
    def refuse_simulation(self, sim: Simulation) -> None:
        from specplan.commands.sim_run import refuse_serving
        from specplan.sim.bounds import check_options, refusal

        if sim.inject == "layer-map":
            raise SpecError([Diagnostic(self._spec.line_of()[0], None, None, "", "--inject "
                                        "layer-map breaks a deployment's KV handoff; this is one "
                                        "instance's spec (give the deployment, or a spec with "
                                        "disaggregation.peer)")])
        plan = self.plan
        if why := refusal(plan.speculative.method, plan.speculative.sampling, sim.inject or "",
                          len(plan.pipeline.stages), bool(plan.speculative.taps),
                          tuple(g.name for g in plan.gates)):
            raise click.UsageError(why)
        check_options(rounds=sim.rounds, requests=sim.requests,
                      width=plan.speculative.num_draft_tokens)
        refuse_serving(sim)

    def launch_refusal(self) -> str | None:
        """The verdict of a plan the engine refuses to launch (even under --allow-errors):
        nothing runs."""
        from specplan.commands.sim_run import launch_refused

        return launch_refused(self.plan)

    def print_not_simulated(self, refused: Refused, *, as_json: bool,
                            console: FittingConsole) -> None:
        from specplan.commands.sim_run import print_not_simulated

        print_not_simulated(self.plan, self.findings(), as_json)  # what refused it

    def simulate(self, sim: Simulation, console: FittingConsole) -> int:
        from specplan.commands import sim_run

        if self.launch_refusal() is not None:
            return sim_run.refused_launch(self.plan, sim.as_json)
        return sim_run.run_simulate(self._sim_path(), sim, console)

    def simulated(self, sim: Simulation) -> Report:
        import tempfile

        from specplan.commands.sim_run import outcome_report

        if (why := self.launch_refusal()) is not None:
            return Report(False, (why,), 0, 0, self.plan.world_size, sim.rounds, 0.0)
        with tempfile.TemporaryDirectory(prefix="specplan-api-") as tmp:
            return outcome_report(self.path or _written(self._spec, Path(tmp)), sim)

    def _sim_path(self) -> str:
        assert self.path is not None, "the CLI simulates a spec file"
        return self.path

    def simulate_rank(self, sim: Simulation, console: FittingConsole) -> None:
        """One rank of a torchrun job (sim/torchrun.py): rank 0 prints, every rank leaves alike."""
        from specplan.commands import sim_run
        from specplan.sim.torchrun import simulate_rank

        simulate_rank(self._sim_path(), self._spec, rounds=sim.rounds, requests=sim.requests,
                      seed=sim.seed, max_layers=sim.max_layers, inject=sim.inject,
                      allow_errors=sim.allow_errors, as_json=sim.as_json, trace_dir=sim.trace_dir,
                      console=console, reports=sim_run, timeout_s=sim.timeout_s)


def _written(spec: Spec, folder: Path) -> Path:
    """A dict-made spec as a file, for the simulated ranks to load."""
    import yaml

    path = folder / f"{spec.name}.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True), sort_keys=False))
    return path


def write_runtime_module(plan: Plan, out_dir: Path) -> str:
    """The torch half of compile, imported only after plan.json is written; a runtime module
    of another plan in `out_dir` is removed (it would sit beside a plan it does not run)."""
    from specplan.io.files import remove_stale

    try:
        from specplan.lower.fx_module import write_runtime_module as write
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            raise
        remove_stale(out_dir, "runtime_*.py", keep=set())
        return "runtime module: skipped (torch is not installed; pip install 'specplan[runtime]')"
    name = write(plan, out_dir).name
    remove_stale(out_dir, "runtime_*.py", keep={name})
    return "wrote {out}/" + name + " (runtime module)"
