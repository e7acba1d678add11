"""What a command is given, as one type: a spec (commands/spec_target.py) or a deployment of a
prefill and a decode instance (commands/deployment.py), both a `Target`.

Each command is written once over Target; which of the two a file is gets decided in one
place, commands/load.py `target_of`. A Target's operations come in pairs: a value (what the
Python API returns, through the command module's value function) and, where the two kinds
print differently, the printing of that value. What a spec has one of, a deployment has a
`Pair` of (`plan`, `planning`); `compiled()` is the one value both return alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Iterator, NamedTuple, Protocol, Sequence, TypeVar

from specplan.errors import Diagnostic, PlanError
from specplan.verify import errors, has_errors

if TYPE_CHECKING:
    from specplan.commands.fit import FittingConsole
    from specplan.deploy import InstancePair
    from specplan.deploy.cross_checks import CrossFinding
    from specplan.ecosystem.nodes import NodeOptions
    from specplan.passes import Planning
    from specplan.plan import Plan
    from specplan.schema.model import Spec
    from specplan.verify.baseline import Baseline
    from specplan.verify.findings import Finding

    AnyFinding = Finding | CrossFinding  # a deployment's findings hold both

T = TypeVar("T")


class Pair(NamedTuple, Generic[T]):
    """What a deployment has one of per instance (its plans, its plannings), by role."""

    prefill: T
    decode: T


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


@dataclass(frozen=True)
class Simulation:
    """simulate's options, as the CLI takes them (the API's keywords are the same names)."""

    rounds: int = 16
    requests: int = 4
    seed: int = 0
    max_layers: int = 16
    inject: str | None = None
    chunk: int | None = None
    allow_errors: bool = False
    as_json: bool = False
    trace_dir: str | None = None
    timeout_s: float | None = None


class Refused(PlanError):
    """The command worked and found what stops it: the verifier's ERROR findings (compile,
    simulate without allow_errors, enforce). The CLI prints the findings and exits 3; the API
    raises it (a PlanError, one diagnostic per ERROR). `findings`: every finding, for printing."""

    def __init__(self, where: str, findings: Sequence[AnyFinding]):
        self.findings = list(findings)
        super().__init__([Diagnostic(where, getattr(f, "line", None), None,
                                     getattr(f, "site", None) or getattr(f, "kind", None) or "",
                                     f.message) for f in errors(self.findings)])


def refuse_errors(where: str, findings: Sequence[AnyFinding]) -> None:
    """The one ERROR gate (compile, simulate, enforce): raise Refused when `findings` hold an
    ERROR."""
    if has_errors(list(findings)):
        raise Refused(where, findings)


def gate(target: Target) -> None:
    """The ERROR gate over `target`'s findings."""
    refuse_errors(target.where, target.findings())


class Target(Protocol):
    """A spec or a deployment, as every command reads it."""

    name: str
    spec: Spec | None  # the spec of a single instance; None for a deployment
    pair: InstancePair | None  # a deployment's two instances, as deploy/load.py reads them

    @property
    def where(self) -> str:
        """The file diagnostics name (`<dict>` for a spec made from a dict)."""

    @property
    def plan(self) -> Plan | Pair[Plan]:
        """A spec's Plan; a deployment's plans, a Pair by role."""

    @property
    def planning(self) -> Planning | Pair[Planning]:
        """A spec's Planning (what the passes made); a deployment's, a Pair by role."""

    # explain
    def refuse_explain(self, *, rank: int | None, picture: str | None) -> None:
        """Raise the usage or spec error of an explain option this kind of target has no use for."""

    def explain_data(self, *, lazy: bool = True) -> dict[str, Any]:
        """The `explain --json` object."""

    def print_explain(self, data: dict[str, Any], *, as_json: bool, rank: int | None,
                      all_families: bool, console: FittingConsole | None) -> None: ...

    def picture(self, kind: str, fmt: str, family: str | None, out: str | None) -> str | None:
        """Draw `kind`; the path written, or None when it went to stdout."""

    # check
    def refuse_check(self, fmt: str, *, baseline: bool = False) -> None:
        """Raise the usage error of a format (or, `baseline`, a baseline) this target has no use for."""

    def write_baseline(self, path: str) -> None:
        """Record today's findings as the baseline at `path` (verify/baseline.py)."""

    def new_findings(self, baseline: Baseline) -> list[AnyFinding]:
        """The findings `baseline` (verify/baseline.py) does not hold."""

    def findings(self) -> list[AnyFinding]:
        """Every finding, worst first per plan (a deployment: across the instances, then prefill's,
        then decode's)."""

    def print_check(self, *, fmt: str, severity: str, verbose: bool,
                    baseline: Baseline | None = None) -> None: ...

    # compile
    def print_refused(self, console: FittingConsole) -> None:
        """The findings that keep compile from writing, as compile prints them."""

    def compiled(self) -> Any:
        """The plan (a deployment: {"prefill": plan, "decode": plan, "kv_handoff": [...]})."""

    def write(self, out: Path, *, runtime: bool) -> Iterator[str]:
        """Write the plan files into `out`, every file or none (with `runtime`, the runtime
        modules too, as the CLI does), saying each file once all are written."""

    # export
    def refuse_export(self, engine: str | None, version: str | None) -> None: ...

    def export(self, engine: str | None = None, version: str | None = None,
               nodes: NodeOptions | None = None) -> str:
        """The launch script; `nodes` (ecosystem/nodes.py NodeOptions): one line per node."""

    # simulate (commands/simulate.py `admit` applies the refusals first)
    def refuse_simulation(self, sim: Simulation) -> None:
        """Raise the usage or spec error of a fault or a size this target cannot simulate."""

    def print_not_simulated(self, refused: Refused, *, as_json: bool,
                            console: FittingConsole) -> None:
        """What check predicts, printed when its ERROR keeps simulate from running."""

    def simulate(self, sim: Simulation, console: FittingConsole) -> int:
        """The run as the CLI reports it; the exit code."""

    def simulated(self, sim: Simulation) -> Report:
        """The run, as the Python API reports it."""
