"""What every engine's launch-line tables hold, and the refusal their disaggregation flags raise.

Each engine's package fills one `LaunchTable` (<engine>/launch.py): the program export writes,
the `python -m` modules import recognises, the environment variables import reads, which
arguments are planned (argparse dest -> spec key), the spec keys a line cannot state, and its
disaggregation flags both ways. ecosystem/ reads and writes launch lines by these tables
(`convention(engine).launch`); nothing there keys a table by an engine's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class LaunchProblem(ValueError):
    """A launch line's disaggregation flags that no spec states."""


class DisaggregationFlags(Protocol):
    """An engine's PD flags: written from a role and connector, read back into them."""

    def write(self, role: str, connector: str) -> list[tuple[str, str, str]]: ...

    def read(self, flags: Mapping[str, object]) -> dict[str, str] | None:
        """`flags`: a line's arguments by flag (argparse's values); the spec's disaggregation
        keys they state (role, connector), or None where the line has no PD flags; `store`
        (the connector's name) where the KV goes through a shared store, planned alone."""

    def implied_device(self, read: Mapping[str, str] | None) -> tuple[str, str] | None:
        """The device a connector runs on only, with the engine's reason, when the line names
        none (None: any device)."""


class NodeFlags(Protocol):
    """An engine's multi-node spelling: the words one node's line adds, per executor.

    `executors`: the executors export writes per-node lines for, the first the default.
    `write(executor, node, nnodes, head, dp)` -> (flag, value, comment) rows for node `node` of
    `nnodes`, `head` the head node's address (host, or host:port). `per_node`: the argparse
    dests that differ from node to node (import compares every other one across the lines);
    `dests`: every dest the rows write but --nnodes (import drops them from the spec's line).
    `ray`: the executor (or None) whose other nodes run `ray_start(node, head)` instead of the
    engine, the head's line naming `ray_dests` and no node count. `image` (formatted with the
    release's `version`) and `api_port`: a LeaderWorkerSet's container."""

    executors: tuple[str, ...]
    per_node: frozenset[str]
    dests: frozenset[str]
    ray: str | None
    ray_dests: frozenset[str]
    image: str
    api_port: int

    def write(self, executor: str, node: int, nnodes: int, head: str,
              dp: int = 1) -> list[tuple[str, str | None, str]]: ...


@dataclass(frozen=True)
class LaunchTable:
    program: str  # the command export writes before the arguments
    modules: tuple[str, ...]  # `python -m MODULE` entry points whose parser is the server's (flags/)
    serve: str  # the console script's words (`sglang serve`, `vllm serve`)
    env_prefix: str  # the engine's environment variables start so
    env: tuple[str, ...]  # the ones import reads
    pp_partition_env: str  # the variable that sets the layers per PP stage
    # argparse dest -> the spec key it lands in; every other argument of the parser is kept
    # verbatim in `engine_args:` and re-emitted by export ("kept, not planned")
    modelled: Mapping[str, str]
    unstated: frozenset[str]  # spec keys a line cannot state, kept from a base spec
    env_defaults: frozenset[tuple[str, str]]  # (variable, value) the engine does when it is unset
    disaggregation: DisaggregationFlags
    # argparse dest -> the values the engine accepts beyond its parser (checked once the
    # arguments are parsed; e.g. vLLM's ModelConfig against QUANTIZATION_METHODS)
    accepted_values: Mapping[str, frozenset[str]] = field(default_factory=dict)
    nodes: NodeFlags | None = None  # per-node launch lines (export --nodes, import of them)
    # The program on a CPU (topology.device: cpu) when the engine's CPU build cannot start
    # `program`, and why (a note export prints); None: `program` starts it there too.
    cpu_program: str | None = None
    cpu_note: str = ""

    def program_on(self, device: str) -> str:
        return self.cpu_program if device == "cpu" and self.cpu_program else self.program
