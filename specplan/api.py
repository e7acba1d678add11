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

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specplan.commands.target import Report

if TYPE_CHECKING:
    from specplan.commands.target import Target
    from specplan.deploy import InstancePair
    from specplan.passes import Planning
    from specplan.schema.model import Spec
    from specplan.verify.findings import Finding

__all__ = ["Deployment", "Report", "load"]


def load(spec: str | Path | dict[str, Any], peer: str | Path | None = None) -> Deployment:
    """A spec YAML file, a deployment (file, or spec with a peer), or a dict of a spec's keys
    (diagnostics then name `<dict>`); with `peer`, two instance specs paired as
    `specplan check A.yaml B.yaml` pairs them."""
    from specplan.commands import load as targets

    if peer is not None:
        return Deployment._of(targets.load_pair(str(spec), str(peer)), Path(spec))
    if isinstance(spec, dict):
        import yaml

        from specplan.schema.load import load_spec_text

        return Deployment(load_spec_text(yaml.safe_dump(spec, sort_keys=False), "<dict>"), None)
    return Deployment._of(targets.load(str(spec)), Path(spec))


class Deployment:
    """One deployment, planned on first use; every method is the command of the same name.

    A single spec (`spec`), or a disaggregated prefill/decode pair (`pair`, `instances`)."""

    def __init__(self, spec: Spec | None, path: Path | None, pair: InstancePair | None = None,
                 *, target: Target | None = None):
        from specplan.commands.load import target_of

        self.spec = spec
        self.path = path
        self.pair = pair
        self._target = target or target_of(pair or spec, None if path is None else str(path))

    @classmethod
    def _of(cls, target: Target, path: Path) -> Deployment:
        return cls(target.spec, path, target.pair, target=target)

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
        return self._target.name

    @property
    def planning(self) -> Planning:
        return self._target.planning

    @property
    def plan(self):
        """The plan, as plan.json holds it."""
        return self._target.plan

    def explain(self) -> dict[str, Any]:
        """Widths, families, ranks, stages, replicas and the round: `explain --json`."""
        return self._target.explain_data(lazy=False)

    def check(self) -> list[Finding]:
        """The verifier's findings, worst first; no ERROR means proven free of desyncs and hangs.
        A disaggregated deployment: the findings across the instances (CrossFinding), then the
        prefill instance's, then the decode instance's (`check --json`'s three lists, joined)."""
        return self._target.findings()

    def compile(self, out_dir: str | Path | None = None) -> Any:
        """The plan; with `out_dir`, plan.json is written there as `specplan compile` writes it
        (a deployment: {"prefill": plan, "decode": plan, "kv_handoff": [...]}, and each plan.json
        with kv_handoff.json).

        Raises PlanError when the verifier finds an ERROR (no file is written then)."""
        from specplan.errors import Diagnostic, PlanError

        from specplan.verify import errors

        found = errors(self.check())
        if found:
            where = str(self.path or "<dict>")
            raise PlanError([Diagnostic(where, getattr(f, "line", None), None,
                                        getattr(f, "site", None) or getattr(f, "kind", ""), f.message)
                             for f in found])
        if out_dir is not None:
            list(self._target.write(Path(out_dir), runtime=False))
        return self._target.compiled()

    def export(self, engine: str | None = None) -> str:
        """The launch line (with its environment) that runs this deployment on `engine`."""
        return self._target.export(engine)

    def simulate(self, *, rounds: int = 16, requests: int = 4, seed: int = 0,
                 max_layers: int = 16) -> Report:
        """Run the whole topology on the CPU (one gloo process per rank, a tiny model; the
        ranks are forked from specplan's fork server, which never imports the calling script)."""
        from specplan.commands.target import Simulation

        return self._target.simulated(Simulation(rounds, requests, seed, max_layers))
