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

    def read(self, flags: dict) -> dict | None: ...


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
