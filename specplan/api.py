"""The Python API: what the commands do, as calls.

    import specplan
    d = specplan.load("specs/deepseek-v4-dspark-tp8-dp8.yaml")   # or a dict of the same keys
    d.explain()                  # the `explain --json` object (rank=R: `--json --rank R`)
    d.check()                    # list[Finding]; [] when the plan is proven clean
    d.compile("build/ds")        # the plan (plan.json content); written when out_dir is given
    d.export("vllm")             # the launch line, as `specplan export` prints it
    d.simulate(rounds=8)         # Report (runs one CPU process per rank; needs torch)

A disaggregated deployment loads the same way: a deployment file (`instances: {prefill,
decode}`) or a spec whose `disaggregation` names its peer. Then `d.disaggregated` is True,
`d.instances` holds each instance as a Deployment of its own ({"prefill": ..., "decode": ...}),
`d.plan` and `d.planning` are a `Pair` (prefill, decode), and every method covers both
instances and the KV handoff, as the commands do:

    pd = specplan.load("specs/disagg/kimi-k3-dspark-pd.yaml")
    pd.explain()["kv_handoff"]   # `explain DEPLOYMENT --json`: instances and kv_handoff
    pd.check()                   # findings across the instances, then prefill's, then decode's
    pd.compile("build/pd")       # {"prefill": plan, "decode": plan, "kv_handoff": [...]}
    pd.export()                  # one launch script per instance
    pd.simulate(rounds=4)        # both instances in one gloo world, the KV handed off by plan

The commands without a spec are functions: `spec_schema()` (`specplan schema`),
`import_line(engine, line, ...)`, `enforce(spec, out, ...)` and `diff(*traces)`; they return
what the command prints (`Said`: `text`, `messages`, `found`).

One path: every method calls the same function of specplan/commands/ the CLI calls (explained,
checked, compiled, exported, simulated, imported, enforced, diffed), so the API applies the
CLI's refusals and bounds. `specplan.Deployment` is the one public deployment type. (The
loader's own record of a prefill/decode pair is `specplan.deploy.InstancePair`;
`Deployment.pair` holds it.)

Where the CLI exits 2 the API raises `specplan.errors.UserError` (SpecError / PlanError, an
option out of its bounds or of no use: OptionError; a command's own words: InputRefused), with
every diagnostic. Where it exits 3 without running on (compile's or simulate's check ERROR) it
raises Refused, a PlanError whose `findings` are what check found; an export the engine cannot
run raises `specplan.ecosystem.translate.Refusal`; otherwise a found problem is in the value
(Report.ok, Said.found). Nothing here imports torch until `simulate` (or the runtime half of
compile) needs it.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import click

from specplan.commands.common import InputRefused, Said
from specplan.commands.target import Pair, Refused, Report, Simulation
from specplan.errors import Diagnostic, OptionError

if TYPE_CHECKING:
    from specplan.commands.target import AnyFinding, Target
    from specplan.deploy import InstancePair
    from specplan.passes import Planning
    from specplan.plan import Plan
    from specplan.schema.model import Spec

__all__ = ["Deployment", "InputRefused", "Pair", "Refused", "Report", "Said", "diff", "enforce",
           "import_line", "load", "spec_schema"]


def load(spec: str | Path | dict[str, Any], peer: str | Path | None = None) -> Deployment:
    """A spec YAML file, a deployment (file, or spec with a peer), or a dict of a spec's keys
    (diagnostics then name `<dict>`); with `peer`, two instance specs paired as
    `specplan check A.yaml B.yaml` pairs them."""
    from specplan.commands import load as targets

    if isinstance(spec, dict):
        import yaml

        from specplan.schema.load import load_spec_text

        return Deployment(load_spec_text(yaml.safe_dump(spec, sort_keys=False), "<dict>"), None)
    if peer is not None:
        return Deployment._of(targets.load_pair(str(spec), str(peer)), Path(spec))
    return Deployment._of(targets.load(str(spec)), Path(spec))


@contextmanager
def _options(where: str) -> Iterator[None]:
    """The CLI's usage errors (an option out of its bounds, or of no use to the target) as the
    API's OptionError, a UserError naming the file."""
    try:
        yield
    except click.ClickException as exc:
        raise OptionError([Diagnostic(where, None, None, "", exc.format_message())]) from None


class Deployment:
    """One deployment, planned on first use; every method is the command of the same name.

    A single spec (`spec`), or a disaggregated prefill/decode pair (`pair`, `instances`)."""

    def __init__(self, spec: Spec | None, path: Path | None, pair: InstancePair | None = None,
                 *, target: Target | None = None):
        from specplan.commands.load import target_of

        self.spec = spec
        self.path = path
        self.pair = pair
        loaded = pair or spec
        assert target is not None or loaded is not None, "a spec, a pair or a target"
        self._target = target or target_of(loaded, None if path is None else str(path))

    @classmethod
    def _of(cls, target: Target, path: Path) -> Deployment:
        return cls(target.spec, path, target.pair, target=target)

    @property
    def disaggregated(self) -> bool:
        return self.pair is not None

    @cached_property
    def instances(self) -> dict[str, Deployment]:
        """Each instance of a disaggregated deployment by role; {} for a single spec."""
        from specplan.commands.deployment import DeploymentTarget

        if not isinstance(self._target, DeploymentTarget):
            return {}
        return {role: Deployment(t.spec, None if t.path is None else Path(t.path), target=t)
                for role, t in self._target.instances.items()}

    @property
    def name(self) -> str:
        return self._target.name

    @property
    def planning(self) -> Planning | Pair[Planning]:
        """What the passes made; a deployment: a Pair (prefill, decode)."""
        return self._target.planning

    @property
    def plan(self) -> Plan | Pair[Plan]:
        """The plan, as plan.json holds it; a deployment: its pair of plans (prefill, decode)."""
        return self._target.plan

    def explain(self, *, rank: int | None = None) -> dict[str, Any]:
        """Widths, families, ranks, stages, replicas and the round: `explain --json`; with
        `rank`, that rank's view (`explain --json --rank R`)."""
        from specplan.commands.explain import explained

        with _options(self._target.where):
            return explained(self._target, rank=rank)

    def picture(self, kind: str, out: str | Path, *, fmt: str = "svg",
                family: str | None = None) -> Path:
        """`explain --picture KIND --format FMT -o OUT`: the picture written to `out`."""
        from specplan.commands.explain import pictured

        with _options(self._target.where):
            pictured(self._target, kind, fmt, family, str(out))
        return Path(out)

    def check(self, *, baseline: str | Path | None = None,
              write_baseline: str | Path | None = None) -> list[AnyFinding]:
        """The verifier's findings, worst first; no ERROR means proven free of desyncs and hangs.
        A disaggregated deployment: the findings across the instances (CrossFinding), then the
        prefill instance's, then the decode instance's (`check --json`'s three lists, joined).
        `baseline`: only those the baseline file does not hold; `write_baseline`: record them."""
        from specplan.commands.check import checked

        with _options(self._target.where):
            found, _ = checked(self._target, baseline=_str(baseline),
                               write_baseline=_str(write_baseline))
        return found

    def compile(self, out_dir: str | Path | None = None, *, runtime: bool = False) -> Any:
        """The plan; with `out_dir`, plan.json is written there as `specplan compile` writes it
        (a deployment: {"prefill": plan, "decode": plan, "kv_handoff": [...]}, and each plan.json
        with kv_handoff.json), every file or none; `runtime`: the runtime modules too (torch).

        Raises Refused (a PlanError) when the verifier finds an ERROR (no file is written then)."""
        from specplan.commands.compile import compiled

        plan, _ = compiled(self._target, None if out_dir is None else Path(out_dir),
                           runtime=runtime)
        return plan

    def export(self, engine: str | None = None, version: str | None = None) -> str:
        """The launch line (with its environment) that runs this deployment on `engine` (in the
        spelling of release `version`)."""
        from specplan.commands.export import exported

        with _options(self._target.where):
            return exported(self._target, engine, version)

    def simulate(self, *, rounds: int = 16, requests: int = 4, seed: int = 0,
                 max_layers: int = 16, inject: str | None = None, allow_errors: bool = False,
                 trace_dir: str | Path | None = None, timeout_s: float | None = None) -> Report:
        """Run the whole topology on the CPU (one gloo process per rank, a tiny model; the
        ranks are forked from specplan's fork server, which never imports the calling script).
        The CLI's refusals first: the options' bounds, a fault the target cannot take, check's
        ERROR (Refused, unless `allow_errors`); a plan the engine refuses to launch is a failed
        Report, nothing run."""
        from specplan.commands.simulate import simulated

        sim = Simulation(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                         inject=inject, allow_errors=allow_errors, trace_dir=_str(trace_dir),
                         timeout_s=timeout_s)
        with _options(self._target.where):
            return simulated(self._target, sim)


def _str(path: str | Path | None) -> str | None:
    return None if path is None else str(path)


def spec_schema() -> str:
    """The JSON Schema of the spec YAML, as `specplan schema` prints it."""
    from specplan.schema.reference import schema_text

    return schema_text()


def import_line(engine: str, line: list[str] | tuple[str, ...] = (), *, script: str | None = None,
                base: str | None = None, model_config: str | None = None,
                name: str | None = None, draft_config: str | None = None,
                version: str | None = None, strict: bool = False,
                env: tuple[str, ...] = (), environ: dict[str, str] | None = None,
                use_env: bool = False, out: str | None = None) -> Said:
    """`specplan import --engine ENGINE [options] -- LINE`: `text` the spec's YAML (empty with
    `out`: written there), `messages` import's notes. `environ`: the SGLANG_* / VLLM_*
    variables the line runs with (and, with `use_env`, the shell variables); default none."""
    from specplan.commands.import_ import LineOptions, imported

    options = LineOptions(strict=strict, variables=tuple(env), use_env=use_env)
    with _options(engine):
        return imported(engine, list(line), dict(environ or {}), script, base, model_config, name,
                        out, draft_config, version, options).raised()


def enforce(spec: str | None, out: str | Path, *, engine: str | None = None,
            line: list[str] | tuple[str, ...] = (), script: str | None = None,
            base: str | None = None, model_config: str | None = None, name: str | None = None,
            environ: dict[str, str] | None = None) -> Said:
    """`specplan enforce SPEC -o OUT` (or `--engine E -- LINE`, with `spec` None): OUT/spec.yaml
    and OUT/plan.json written together, `text` the report and launch line; `found` when even
    specplan's plan has errors (nothing written)."""
    from specplan.commands.enforce import enforced

    if (spec is None) == (engine is None):
        raise OptionError([Diagnostic(str(out), None, None, "", "enforce takes one SPEC, or "
                                      "engine= and line=")])
    with _options(spec or engine or ""):
        return enforced(spec, str(out), engine, list(line), dict(environ or {}), script, base,
                        model_config, name).raised()


def diff(*traces: str | Path, acceptance: bool = False, threshold: float = 5.0) -> Said:
    """`specplan diff TRACES...`: `text` the first divergence across the ranks (`found`) or that
    there is none; with `acceptance`, run B's accepted length against run A's (`found`: B falls
    short by more than `threshold` percent)."""
    from specplan.commands.common import THRESHOLD
    from specplan.commands.diff import diffed

    low, high = THRESHOLD
    if not low <= threshold <= high:  # the CLI's FloatRange; nan is outside it
        raise OptionError([Diagnostic(str(traces[0]) if traces else "<traces>", None, None, "",
                                      f"threshold {threshold}: expected {low:g} .. {high:g}")])
    return diffed(tuple(str(t) for t in traces), acceptance=acceptance, threshold=threshold).raised()
