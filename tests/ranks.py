"""The rank-worker protocol of the multi-rank tests: how a rank is started, what it is given and
how it reports, in one place for the runtime's, the lowering's and the engines' workers.

The test's side: `launch(world, worker, *args, module=...)` forks `world` ranks from a warm
server (specplan's ForkServer), each with torchrun's environment (MASTER_ADDR, MASTER_PORT,
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE), its own session and its own output files, and
calls `<module>.main([worker, *args])` there. Past `timeout` every rank still alive is killed;
in every case every child is waited for, so no test leaves a process behind. It returns one
`Result` per rank.

The rank's side: `main` hands its table of workers to `serve`, which runs
`workers[worker](*args)` and reports on stdout how it ended, the last line and the exit code:

    RESULT <json>                  0  the worker's return value
    ERROR <Type>: <message>        3  a RuntimeDivergence (what the runtime tests look for)
    REFUSED <message>              4  an engine plugin refused the start (EngineRefused)
    <traceback> ERROR internal     1  anything else

A worker reads its rank and world from the environment (`RANK`, `WORLD_SIZE`), as an engine does.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from specplan.sim.forkserver import ForkServer

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "tests" / "runtime"  # the runtime's workers (rt_workers, the default module)
DIVERGED, REFUSED = 3, 4


@dataclass
class Result:
    """What one rank left: its exit code and its output."""

    rank: int
    returncode: int
    stdout: str
    stderr: str

    def _line(self, prefix: str) -> str | None:
        return next((l for l in self.stdout.splitlines() if l.startswith(prefix)), None)

    @property
    def error(self) -> str:
        """The `ERROR <type>: <message>` line a worker printed, or ''."""
        return self._line("ERROR ") or ""

    @property
    def refused(self) -> str:
        """The `REFUSED <message>` line a worker printed, or ''."""
        return self._line("REFUSED ") or ""

    @property
    def result(self):
        line = self._line("RESULT ")
        return json.loads(line[7:]) if line else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, worker: str, *args, timeout: float = 90, env: dict | None = None,
           module: str = "rt_workers", path: tuple[Path, ...] = (),
           preload: tuple = ("torch", "triton")) -> list[Result]:
    """Run `<module>.<worker>(*args)` on every rank; `path` holds the module's folder.

    Ranks are forked from a server that has imported `preload` once (specplan's ForkServer:
    torch and triton, and for the engines' tests the engine's modules), not started as fresh
    interpreters: each rank then costs milliseconds to start, not the seconds of its imports,
    which dominated every multi-rank test."""
    port = free_port()
    out = Path(tempfile.mkdtemp(prefix="specplan-launch-"))
    search = [str(x) for x in (*path, RUNTIME, ROOT)]
    server = ForkServer.shared(preload, search)
    try:
        procs = []
        for rank in range(world):
            e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                     WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                     OMP_NUM_THREADS="1", **(env or {}))
            procs.append(server.spawn("tests.ranks:_rank", (
                e, module, [worker, *map(str, args)], str(out / f"{rank}.out"),
                str(out / f"{rank}.err"))))
        return reap(procs, timeout, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _rank(env: dict, module: str, argv: list[str], out: str, err: str) -> None:
    """A rank, in the forked child: its own session, environment and output files."""
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    for fd, name in ((1, out), (2, err)):
        f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    import torch

    torch.set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    importlib.import_module(module).main(argv)
    sys.stdout.flush()
    sys.stderr.flush()


def serve_engine(workers: dict, argv: list[str], harness: str) -> None:
    """An engines worker module's main: argv is the worker, the wheel's root and the worker's
    arguments; `harness` (a module of tests/engines/) puts that wheel first, then `serve`."""
    worker, root, *args = argv
    sys.path.insert(0, str(Path(__file__).resolve().parent / "engines"))
    importlib.import_module(harness).install(root)
    serve(workers, [worker, *args])


def serve(workers: dict, argv: list[str]) -> None:
    """A rank's side: run `workers[argv[0]](*argv[1:])`, report how it ended (the module's
    table) and exit the process."""
    from specplan.plugins import EngineRefused
    from specplan.runtime import RuntimeDivergence

    worker, *args = argv
    try:
        result = workers[worker](*args)
    except EngineRefused as exc:
        _end(f"REFUSED {exc}", REFUSED)
    except RuntimeDivergence as exc:
        _end(f"ERROR {type(exc).__name__}: {exc}", DIVERGED)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        _end("ERROR internal", 1)
    _end("RESULT " + json.dumps(result), 0)


def _end(line: str, code: int) -> None:
    print(line, flush=True)
    os._exit(code)


def warm(harness: str, root: str) -> None:
    """A fork server's preload for ranks running an engine's code: the engine harness's stubs
    (`install(root)`, the wheel at `root`), the environment the engine reads when imported
    (`WARM_ENV`) and its heavy modules (`WARM`), once for every rank forked from the server."""
    mod = importlib.import_module(harness)
    os.environ.update(mod.WARM_ENV)
    mod.install(root)
    for name in mod.WARM:
        importlib.import_module(name)


def reap(procs, timeout: float, out: Path) -> list[Result]:
    deadline = time.monotonic() + timeout
    for p in procs:
        p.wait(max(0.1, deadline - time.monotonic()))
        if p.returncode is None:
            kill_all(procs)
            break
    results = []
    for i, p in enumerate(procs):
        p.wait()
        err = (out / f"{i}.err").read_text() if (out / f"{i}.err").exists() else ""
        if time.monotonic() > deadline and p.returncode == -signal.SIGKILL:
            err += f"\n[launch] killed after {timeout}s"
        results.append(Result(i, p.returncode, (out / f"{i}.out").read_text()
                              if (out / f"{i}.out").exists() else "", err))
    return results


def kill_all(procs) -> None:
    for p in procs:
        if p.returncode is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the rank's own session (setsid)
            except (ProcessLookupError, PermissionError):  # not yet its own group, or gone
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
