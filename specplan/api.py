"""The Python API: what the commands do, as calls.

    import specplan
    d = specplan.load("specs/deepseek-v4-dspark-tp16-dp8.yaml")   # or a dict of the same keys
    d.explain()                  # the `explain --json` object
    d.check()                    # list[Finding]; [] when the plan is proven clean
    d.compile("build/ds")        # the plan (plan.json content); written when out_dir is given
    d.export("vllm")             # the launch line, as `specplan export` prints it
    d.simulate(rounds=8)         # Report (runs one CPU process per rank; needs torch)

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


def load(spec: str | Path | dict[str, Any]) -> Deployment:
    """A spec YAML file, or a dict with the same keys (diagnostics then name `<dict>`)."""
    from specplan.schema import load_spec
    from specplan.schema.load import load_spec_text

    if isinstance(spec, dict):
        import yaml

        return Deployment(load_spec_text(yaml.safe_dump(spec, sort_keys=False), "<dict>"), None)
    return Deployment(load_spec(spec), Path(spec))


class Deployment:
    """One deployment, planned on first use; every method is the command of the same name."""

    def __init__(self, spec: Spec, path: Path | None):
        self.spec = spec
        self.path = path

    @property
    def name(self) -> str:
        return self.spec.name

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
        from specplan.explain import explain_data
        from specplan.round_view import round_data

        data = explain_data(self.spec, self.planning.mesh)
        data["round"] = round_data(self.plan)
        return data

    def check(self) -> list[Finding]:
        """The verifier's findings, worst first; no ERROR means proven free of desyncs and hangs."""
        from specplan.verify import verify

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
            raise PlanError([Diagnostic(where, f.line, None, f.site or "", f.message)
                             for f in findings if f.severity == "ERROR"])
        if out_dir is not None:
            write_plan(self.plan, out_dir)
        return self.plan

    def export(self, engine: str | None = None) -> str:
        """The launch line (with its environment) that runs this deployment on `engine`."""
        from specplan.ecosystem.export import export, render

        return render(export(self.spec, engine))

    def simulate(self, *, rounds: int = 16, requests: int = 4, seed: int = 0,
                 max_layers: int = 16) -> Report:
        """Run the whole topology on the CPU (one gloo process per rank, a tiny model)."""
        from specplan.sim.launch import Options, simulate
        from specplan.sim.report import verdict

        opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers, inject="")
        with tempfile.TemporaryDirectory(prefix="specplan-api-") as tmp:
            path = self.path or _written(self.spec, Path(tmp))
            outcome = simulate(str(path), opt)
        v = verdict(outcome)
        return Report(v.ok, tuple(v.problems), v.checked, v.agreed, len(outcome.results), rounds,
                      outcome.wall_s)


def _written(spec: Spec, folder: Path) -> Path:
    """A dict-made spec as a file, for the simulated ranks to load."""
    import yaml

    path = folder / f"{spec.name}.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True), sort_keys=False))
    return path
