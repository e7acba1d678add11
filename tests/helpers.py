"""What test files across tests/ share: the repository root and the one way to run `specplan`.

    from tests.helpers import ROOT, cli

    run = cli("check", spec, "--json")                 # in this process (click's CliRunner)
    run = cli("explain", spec, process=True)           # `python -m specplan.cli`, cwd ROOT
    run = cli("check", spec, code=(0, 3))              # and assert: no crash, one of these codes

Either way the answer is a `Run`: `returncode` (also `exit_code`), `stdout`, `stderr`, `output`
(what a terminal shows) and, in process, the `exception` the command raised (a SystemExit for
an ordinary exit). A subprocess is for what only a fresh interpreter shows (its real exit
status, the traceback it prints, imports); everything else runs in process, in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    """One run of a command: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str
    output: str
    exception: BaseException | None = None

    @property
    def exit_code(self) -> int:
        return self.returncode


def cli(*args, process: bool = False, program: str = "specplan.cli", cwd: Path | str | None = None,
        env: dict | None = None, catch: bool = True, code: int | tuple[int, ...] | None = None,
        timeout: float = 600) -> Run:
    """`specplan *args` (each argument str()-ed), in this process or (`process`) as
    `python -m <program>` in cwd (the repository root unless given). In process, `cwd` is
    entered for the call when given, `env` overlays os.environ as CliRunner does, and `catch`
    False lets an exception through. `code`: assert the command did not crash and exited so."""
    argv = [str(a) for a in args]
    run = _process(program, argv, cwd, env, timeout) if process else _in_process(argv, cwd, env, catch)
    if code is not None:
        assert run.exception is None or isinstance(run.exception, SystemExit), repr(run.exception)
        assert run.returncode in ((code,) if isinstance(code, int) else code), run.output[-3000:]
    return run


def _process(program: str, argv: list[str], cwd, env: dict | None, timeout: float) -> Run:
    done = subprocess.run([sys.executable, "-m", program, *argv], cwd=cwd or ROOT,
                          env=dict(os.environ, **env) if env else None,
                          capture_output=True, text=True, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr, done.stdout + done.stderr)


def _in_process(argv: list[str], cwd, env: dict | None, catch: bool) -> Run:
    from click.testing import CliRunner

    from specplan.cli import main

    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        res = CliRunner().invoke(main, argv, env=env, catch_exceptions=catch)
    return Run(res.exit_code, res.stdout, res.stderr, res.output, res.exception)
