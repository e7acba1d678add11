"""Launch real gloo ranks as subprocesses over loopback, as torchrun would, and reap them all.

`launch(world, worker, *args)` runs `rt_workers.<worker>(*args)` in `world` processes with
MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK set, each in its own session, and returns
one `Result` per rank. Past `timeout` every rank still alive is killed; in every case every
child is waited for, so no test leaves a process behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@dataclass
class Result:
    rank: int
    returncode: int
    stdout: str
    stderr: str

    @property
    def error(self) -> str:
        """The `ERROR <type>: <message>` line a worker printed, or ''."""
        return next((l for l in self.stdout.splitlines() if l.startswith("ERROR ")), "")

    @property
    def result(self):
        line = next((l for l in self.stdout.splitlines() if l.startswith("RESULT ")), None)
        return json.loads(line[7:]) if line else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(world: int, worker: str, *args, timeout: float = 90, env: dict | None = None,
           module: str = "rt_workers", path: tuple[Path, ...] = ()) -> list[Result]:
    """Run `<module>.<worker>(*args)` on every rank; `path` holds the module's folder."""
    port = free_port()
    procs = []
    for rank in range(world):
        e = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                 WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                 PYTHONPATH=os.pathsep.join(map(str, (*path, HERE, ROOT))), OMP_NUM_THREADS="1",
                 **(env or {}))
        cmd = [sys.executable, "-c", f"import sys, {module}; {module}.main(sys.argv[1:])",
               worker, *map(str, args)]
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, start_new_session=True))
    return reap(procs, timeout)


def reap(procs, timeout: float) -> list[Result]:
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_all(procs)
            out, err = p.communicate()
            err += f"\n[launch] killed after {timeout}s"
        outs.append((out, err))
    return [Result(i, p.returncode, o, e) for i, (p, (o, e)) in enumerate(zip(procs, outs))]


def kill_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)


def compile_spec(tmp: Path, text: str) -> Path:
    """Compile a spec written as YAML text into tmp/<name>/plan.json; returns the plan path."""
    from specplan.lower import build_plan, write_plan
    from specplan.passes import plan as run_passes
    from specplan.schema import load_spec

    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "spec.yaml"
    src.write_text(text)
    spec = load_spec(str(src))
    return write_plan(build_plan(run_passes(spec)), tmp / spec.name)


def serve(workers: dict, argv: list[str]) -> None:
    """A worker process's side: run `workers[argv[0]](*argv[1:])` and report on stdout.

    `RESULT <json>` and exit 0; `ERROR <type>: <message>` and exit 3 for a runtime divergence
    (what the test looks for); `ERROR internal` with a traceback and exit 1 otherwise.
    """
    import traceback

    from specplan.runtime import RuntimeDivergence

    worker, *args = argv
    try:
        result = workers[worker](*args)
    except RuntimeDivergence as exc:
        print(f"ERROR {type(exc).__name__}: {exc}", flush=True)
        os._exit(3)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        print("ERROR internal", flush=True)
        os._exit(1)
    print("RESULT " + json.dumps(result), flush=True)
    os._exit(0)
