"""User-facing errors: every problem points at a file, a line and a dotted path.

`SpecError` (bad YAML, impossible topology) and `PlanError` (a spec the planner cannot
plan) carry every diagnostic of a file at once; the CLI prints them one per line as
`file:line:col: dotted.path: message` (or `file: message` without a line) and exits 2.
"""

from __future__ import annotations

from dataclasses import dataclass

# Every command's exit codes, the one table (README.md): done; an internal error (a traceback);
# bad input (nothing written); it worked and found a problem (a finding, a divergence).
EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM = 0, 1, 2, 3


@dataclass(frozen=True, order=True)
class Diagnostic:
    file: str
    line: int | None  # 1-based
    col: int | None  # 1-based
    path: str  # dotted path into the document, "" for the whole file
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}:{self.col}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


class UserError(Exception):
    """A problem in what the user gave us; never a bug in specplan."""

    def __init__(self, diagnostics: list[Diagnostic]):
        assert diagnostics, "a user error needs at least one diagnostic"
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.line or 0, d.col or 0, d.path))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class SpecError(UserError):
    """The topology YAML is malformed, mistyped or inconsistent."""


class OptionError(UserError):
    """An option out of its bounds, or of no use to what it was given: the CLI's usage error
    (exit 2), as the Python API raises it."""


class PlanError(UserError):
    """The spec is well-formed but cannot be planned as asked."""

    @classmethod
    def single(cls, spec, path: tuple, message: str) -> "PlanError":
        """One diagnostic pointing at `path` of the spec's YAML."""
        file, line, col = spec.where(*path)
        dotted = ".".join(str(x) for x in path)
        return cls([Diagnostic(file, line, col, dotted, message)])
