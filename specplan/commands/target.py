"""What a command is given, as one type: a spec (commands/spec_target.py) or a deployment of a
prefill and a decode instance (commands/deployment.py), both a `Target`.

Each command is written once over Target; which of the two a file is gets decided in one
place, commands/load.py `target_of`. A Target's operations come in pairs: a value (what the Python
API returns) and, where the two kinds print differently, the printing of that value.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Protocol

if TYPE_CHECKING:
    from specplan.deploy import InstancePair
    from specplan.schema.model import Spec


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
    """simulate's options, as the CLI takes them."""

    rounds: int
    requests: int
    seed: int
    max_layers: int
    inject: str | None = None
    chunk: int | None = None
    allow_errors: bool = False
    as_json: bool = False
    trace_dir: str | None = None
    timeout_s: float | None = None


class Target(Protocol):
    """A spec or a deployment, as every command reads it."""

    name: str
    spec: Spec | None  # the spec of a single instance; None for a deployment
    pair: InstancePair | None  # a deployment's two instances, as deploy/load.py reads them

    # explain
    def refuse_explain(self, *, rank: int | None, picture: str | None) -> None:
        """Raise the usage or spec error of an explain option this kind of target has no use for."""

    def explain_data(self, *, lazy: bool = True) -> dict[str, Any]:
        """The `explain --json` object."""

    def print_explain(self, data: dict, *, as_json: bool, rank: int | None, all_families: bool,
                      console) -> None: ...

    def picture(self, kind: str, fmt: str, family: str | None, out: str | None) -> str | None:
        """Draw `kind`; the path written, or None when it went to stdout."""

    # check
    def refuse_check(self, fmt: str, *, baseline: bool = False) -> None:
        """Raise the usage error of a format (or, `baseline`, a baseline) this target has no use for."""

    def write_baseline(self, path: str) -> None:
        """Record today's findings as the baseline at `path` (verify/baseline.py)."""

    def new_findings(self, baseline) -> list:
        """The findings `baseline` (verify/baseline.py) does not hold."""

    def findings(self) -> list:
        """Every finding, worst first per plan (a deployment: across the instances, then prefill's,
        then decode's)."""

    def print_check(self, *, fmt: str, severity: str, verbose: bool, baseline=None) -> None: ...

    # compile
    def print_refused(self, console) -> None:
        """The findings that keep compile from writing, as compile prints them."""

    def compiled(self) -> Any:
        """The plan (a deployment: {"prefill": plan, "decode": plan, "kv_handoff": [...]})."""

    def write(self, out: Path, *, runtime: bool) -> Iterator[str]:
        """Write the plan files into `out` (with `runtime`, the runtime modules too, as the CLI
        does), saying each file as it goes."""

    # export
    def refuse_export(self, engine: str | None, version: str | None) -> None: ...

    def export(self, engine: str | None = None, version: str | None = None,
               nodes=None) -> str:
        """The launch script; `nodes` (ecosystem/nodes.py NodeOptions): one line per node."""

    # simulate
    def simulate(self, sim: Simulation, console) -> int:
        """The run as the CLI reports it; the exit code."""

    def simulated(self, sim: Simulation) -> Report:
        """The run, as the Python API reports it."""
