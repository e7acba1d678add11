"""The Python API: what the commands do, as calls.

    import specplan
    d = specplan.load("specs/deepseek-v4-dspark-tp8-dp8.yaml")   # or a dict of the same keys
    d.explain()                  # the `explain --json` object
    d.check()                    # list[Finding]; [] when the plan is proven clean
    d.compile("build/ds")        # the plan (plan.json content); written when out_dir is given
    d.export("vllm")             # the launch line, as `specplan export` prints it
    d.simulate(rounds=8)         # Report (runs one CPU process per rank; needs torch)

A disaggregated deployment loads the same way: a deployment file (`instances: {prefill,
decode}`) or a spec whose `disaggregation` names its peer. Then `d.disaggregated` is True,
`d.instances` holds each instance as a Deployment of its own ({"prefill": ..., "decode": ...}),
and every method covers both instances and the KV handoff, as the commands do:

    pd = specplan.load("specs/disagg/kimi-k3-dspark-pd.yaml")
    pd.explain()["kv_handoff"]   # `explain DEPLOYMENT --json`: instances and kv_handoff
    pd.check()                   # findings across the instances, then prefill's, then decode's
    pd.compile("build/pd")       # {"prefill": plan, "decode": plan, "kv_handoff": [...]}
    pd.export()                  # one launch script per instance
    pd.simulate(rounds=4)        # both instances in one gloo world, the KV handed off by plan

`specplan.Deployment` is the one public deployment type. (The loader's own record of a
prefill/decode pair is `specplan.deploy.InstancePair`; `Deployment.pair` holds it.)

Bad input raises `specplan.errors.UserError` (SpecError / PlanError) carrying every diagnostic;
an export the engine cannot run raises `specplan.ecosystem.translate.Refusal`. Nothing here
imports torch until `simulate` (or the runtime half of compile) needs it.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specplan.deploy import InstancePair
    from specplan.passes import Planning
    from specplan.schema.model import Spec
    from specplan.verify.findings import Finding


@dataclass(frozen=True)
class Report:
    """What `simulate` found: the verdict and the figures of the run."""

    ok: bool
    problems: tuple[str, ...]
    requests_checked: int  # requests whose tokens were compared with single-process decoding
    requests_agreed: int  # requests whose ranks all emitted the same tokens
    world_size: int
    rounds: int
    wall_s: float


def load(spec: str | Path | dict[str, Any], peer: str | Path | None = None) -> Deployment:
    """A spec YAML file, a deployment (file, or spec with a peer), or a dict of a spec's keys
    (diagnostics then name `<dict>`); with `peer`, two instance specs paired as
    `specplan check A.yaml B.yaml` pairs them."""
    from specplan.deploy import InstancePair, load_pair, load_target

    if peer is not None:
        return Deployment(None, Path(spec), pair=load_pair(str(spec), str(peer)))
    from specplan.schema.load import load_spec_text

    if isinstance(spec, dict):
        import yaml

        return Deployment(load_spec_text(yaml.safe_dump(spec, sort_keys=False), "<dict>"), None)
    target = load_target(str(spec))
    if isinstance(target, InstancePair):
        return Deployment(None, Path(spec), pair=target)
    return Deployment(target, Path(spec))


class Deployment:
    """One deployment, planned on first use; every method is the command of the same name.

    A single spec (`spec`), or a disaggregated prefill/decode pair (`pair`, `instances`)."""

    def __init__(self, spec: Spec | None, path: Path | None, pair: InstancePair | None = None):
        self.spec = spec
        self.path = path
        self.pair = pair

    @property
    def disaggregated(self) -> bool:
        return self.pair is not None

    @cached_property
    def instances(self) -> dict[str, Deployment]:
        """Each instance of a disaggregated deployment by role; {} for a single spec."""
        if self.pair is None:
            return {}
        return {i.role: Deployment(i.spec, None if i.file == self.pair.file else Path(i.file))
                for i in self.pair.instances}

    @property
    def name(self) -> str:
        return self.pair.name if self.pair else self.spec.name

    @cached_property
    def planning(self) -> Planning:
        from specplan.passes import plan

        return plan(self.spec)

    @cached_property
    def plan(self) -> dict[str, Any]:
        """The plan, as plan.json holds it."""
        from specplan.lower import build_plan

        return build_plan(self.planning)

    def explain(self) -> dict[str, Any]:
        """Widths, families, ranks, stages, replicas and the round: `explain --json`."""
        if self.pair is not None:
            from specplan.deploy.explain import deployment_data

            return deployment_data(self.pair)
        from specplan.explain import explain_data
        from specplan.round_view import round_data

        data = explain_data(self.spec, self.planning.mesh)
        data["round"] = round_data(self.plan)
        return data

    def check(self) -> list[Finding]:
        """The verifier's findings, worst first; no ERROR means proven free of desyncs and hangs.
        A disaggregated deployment: the findings across the instances (CrossFinding), then the
        prefill instance's, then the decode instance's (`check --json`'s three lists, joined)."""
        from specplan.verify import verify

        if self.pair is not None:
            cross, own = self._checked
            return [*cross, *(f for _, found in own.values() for f in found)]

        return verify(self.plan)

    def compile(self, out_dir: str | Path | None = None) -> dict[str, Any]:
        """The plan; with `out_dir`, plan.json is written there as `specplan compile` writes it.

        Raises PlanError when the verifier finds an ERROR (no file is written then)."""
        from specplan.errors import Diagnostic, PlanError
        from specplan.lower import write_plan
        from specplan.verify import has_errors

        findings = self.check()
        if has_errors(findings):
            where = str(self.path or "<dict>")
            raise PlanError([Diagnostic(where, getattr(f, "line", None), None,
                                        getattr(f, "site", None) or getattr(f, "kind", ""), f.message)
                             for f in findings if f.severity == "ERROR"])
        if self.pair is not None:
            return self._compile_pair(out_dir)
        if out_dir is not None:
            write_plan(self.plan, out_dir)
        return self.plan

    def export(self, engine: str | None = None) -> str:
        """The launch line (with its environment) that runs this deployment on `engine`."""
        from specplan.ecosystem.export import export, render

        if self.pair is not None:
            from specplan.commands.deployment import export as export_pair

            if engine is not None:
                raise ValueError("a disaggregated deployment exports each instance on its own "
                                 "engine; call export() without an engine")
            return export_pair(self.pair)
        return render(export(self.spec, engine))

    def simulate(self, *, rounds: int = 16, requests: int = 4, seed: int = 0,
                 max_layers: int = 16) -> Report:
        """Run the whole topology on the CPU (one gloo process per rank, a tiny model; the
        ranks are forked from specplan's fork server, which never imports the calling script)."""
        from specplan.sim.launch import Options, simulate
        from specplan.sim.report import verdict

        opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers, inject="")
        if self.pair is not None:
            from specplan.deploy.simulate import simulate as simulate_pair, verdict as pair_verdict

            out = simulate_pair(self.pair, opt)
            v = pair_verdict(out)
            return Report(v.ok, tuple(v.problems), v.checked, v.agreed,
                          len(out.prefill) + len(out.results), rounds, out.wall_s)
        with tempfile.TemporaryDirectory(prefix="specplan-api-") as tmp:
            path = self.path or _written(self.spec, Path(tmp))
            outcome = simulate(str(path), opt)
        v = verdict(outcome)
        return Report(v.ok, tuple(v.problems), v.checked, v.agreed, len(outcome.results), rounds,
                      outcome.wall_s)


    @cached_property
    def _checked(self) -> tuple[list, dict]:
        from specplan.deploy.handoff import plan_handoff
        from specplan.deploy.cross_report import check_instances
        from specplan.deploy.cross_checks import check_deployment

        self._handoff = plan_handoff(self.pair)
        return check_deployment(self._handoff), check_instances(self.pair)

    def _compile_pair(self, out_dir) -> dict[str, Any]:
        from specplan.commands.deployment import handoff_data, write_plans

        _, own = self._checked
        if out_dir is not None:
            write_plans(self.pair, own, self._handoff, Path(out_dir))
        data = handoff_data(self.pair, own, self._handoff)
        return {**{role: built for role, (built, _) in own.items()}, "kv_handoff": data["kv_handoff"]}


def _written(spec: Spec, folder: Path) -> Path:
    """A dict-made spec as a file, for the simulated ranks to load."""
    import yaml

    path = folder / f"{spec.name}.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True), sort_keys=False))
    return path
