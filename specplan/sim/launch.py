"""`specplan simulate`: one process per rank over loopback gloo, a progress bar, a verdict.

The parent compiles the sim's plan (torch-free), writes sim.json, starts world_size workers
(each in its own session, MASTER_ADDR=127.0.0.1 and a free port), follows rank 0's progress
file, and reaps every child in every case: when one rank fails, the others get
`GRACE_S` seconds to fail on their own (their collectives time out or see the peer gone),
then every survivor is killed; Ctrl-C kills them all before it propagates.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from specplan.sim.bounds import faults, is_gate
from specplan.sim.forkserver import Child, ForkServer
from specplan.sim.setup import Prepared, foreign, prepare

GRACE_S = 60.0


@dataclass
class Options:
    rounds: int = 16
    requests: int = 4
    seed: int = 0
    max_layers: int = 16
    inject: str = ""
    spec: bool = True
    unfused: bool = False
    progress: bool = True
    keep: bool = False
    timeout_s: float | None = None  # --timeout-s: the collectives' (sim/setup.py collective_timeout_s)


@dataclass
class Outcome:
    prepared: Prepared
    options: Options
    results: dict[int, dict]
    returncodes: dict[int, int | None]
    wall_s: float
    sim_dir: Path
    notes: list[str] = field(default_factory=list)
    trace_dir: str | None = None  # --trace-dir: where the ranks wrote their traces


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_config(sim_dir: Path, prep: Prepared, opt: Options, rendezvous_s: float = 300.0) -> None:
    """sim.json; `rendezvous_s` (the spec's own runtime.timeout_s) bounds the ranks' start, so
    a loaded machine slow to start them is not cut off at the sim's short collective timeout."""
    world = prep.plan.world_size
    sim = {"rounds": opt.rounds, "requests": opt.requests, "seed": opt.seed,
           "inject": opt.inject if opt.inject in faults("decisions", "rank") or is_gate(opt.inject) else "",
           "kill_rank": world - 1, "kill_round": max(1, opt.rounds // 2),
           "spec": opt.spec, "unfused": opt.unfused, "progress": str(sim_dir / "progress")}
    plans = {}
    (sim_dir / "plan.json").write_text(prep.plan.dumps())
    if opt.inject == "foreign-plan":
        other = foreign(prep.spec, sim_dir)
        (sim_dir / "foreign.json").write_text(other.dumps())
        plans[str(world - 1)] = str(sim_dir / "foreign.json")
    (sim_dir / "sim.json").write_text(json.dumps({"model": prep.model, "sim": sim, "plans": plans,
                                                  "rendezvous_s": rendezvous_s}))


def start(sim_dir: Path, world: int, module: str = "specplan.sim.worker") -> list[Child]:
    port = free_port()
    procs: list[Child] = []
    for rank in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                   WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   OMP_NUM_THREADS="1")
        procs.append(spawn(module, [str(sim_dir)], env, sim_dir / f"rank{rank}.log",
                           procs[0].pid if procs else 0))
    return procs


def spawn(module: str, argv: list[str], env: dict, log: Path, group: int = 0) -> Child:
    """`python -m module *argv` as a rank, forked from a server that has imported torch and
    triton once (a rank then starts in milliseconds, not the seconds of those imports): out of
    the terminal's process group (Ctrl-C reaches the parent only, which ends them all), in one
    group of its own with its peers (`group`: the first rank's pid, 0 for the first), dying with
    the fork server, which dies with the parent however it dies."""
    return rank_server().spawn("specplan.sim.launch:_rank_main", (module, argv, env, str(log), group))


def rank_server() -> ForkServer:
    """The fork server the ranks start from. Asking for it early lets it import torch and triton
    (seconds) while the parent plans: `simulate` does so before it loads the spec."""
    return ForkServer.shared(("torch", "triton"), path=[str(Path(__file__).resolve().parents[2])])


def _rank_main(module: str, argv: list[str], env: dict, log: str, group: int) -> None:
    import runpy

    _join_group(group)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for std in (1, 2):
        os.dup2(fd, std)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.argv = [module, *argv]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def _join_group(group: int) -> None:
    """Join the first rank's process group (0: make one). The first rank, forked just before,
    may not have made its group yet: wait a little for it, then make one of our own."""
    end = time.monotonic() + 10.0
    while True:
        try:
            os.setpgid(0, group)
            return
        except PermissionError:
            if time.monotonic() > end:
                os.setpgid(0, 0)
                return
            time.sleep(0.01)


def kill_all(procs: list[Child]) -> None:
    for pgid in {os.getpgid(p.pid) for p in procs if _alive_group(p)}:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def _alive_group(p: Child) -> bool:
    try:
        return p.poll() is None and os.getpgid(p.pid) != os.getpgrp()
    except ProcessLookupError:
        return False


@contextlib.contextmanager
def sim_folder(prefix: str, keep: bool = False):
    """The run's temporary folder, gone on every exit: a normal one, an error, Ctrl-C, SIGTERM
    (turned into SystemExit(143) while the run lasts, so every `finally` runs) and SIGKILL (a
    reaper process removes it once the parent's end of its pipe closes)."""
    where = Path(tempfile.mkdtemp(prefix=prefix))
    reaper = None if keep else _reaper(where)
    old = signal.getsignal(signal.SIGTERM)
    main = threading.current_thread() is threading.main_thread()
    if main:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        yield where
    finally:
        if main:
            signal.signal(signal.SIGTERM, old)
        if not keep:
            shutil.rmtree(where, ignore_errors=True)
        if reaper is not None:  # the folder is gone: its sleep before removing it is not needed
            reaper.kill()
            reaper.wait()


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


_REAP = ("import shutil, sys, time\nsys.stdin.read()\ntime.sleep(0.5)\n"
         "shutil.rmtree(sys.argv[1], ignore_errors=True)")


def _reaper(where: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _REAP, str(where)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def watch(procs, sim_dir: Path, rounds: int, on_round, deadline_s: float) -> list[str]:
    """Wait for every rank; returns notes on ranks killed after a failure or the deadline."""
    notes, failed_at = [], None
    end = time.monotonic() + deadline_s
    progress = sim_dir / "progress"
    while any(p.poll() is None for p in procs):
        if progress.exists():
            text = progress.read_text().strip()
            if text:
                on_round(int(text))
        codes = [p.poll() for p in procs]
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
            left = [i for i, c in enumerate(codes) if c is None]
            notes.append(f"ranks {left} still running {GRACE_S:g}s after a rank failed: killed")
            break
        if time.monotonic() > end:
            notes.append(f"the run passed its deadline of {deadline_s:g}s: every rank killed")
            break
        time.sleep(0.05)
    kill_all(procs)
    return notes


def simulate(spec_path: str, opt: Options, on_round=lambda r: None) -> Outcome:
    from specplan.schema import load_spec

    rank_server()
    spec = load_spec(spec_path)
    with sim_folder("specplan-sim-", opt.keep) as sim_dir:
        prep = prepare(spec, sim_dir, requests=opt.requests, max_layers=opt.max_layers, seed=opt.seed,
                       timeout_s=opt.timeout_s)
        write_config(sim_dir, prep, opt, spec.runtime.timeout_s)
        world = prep.plan.world_size
        t0 = time.monotonic()
        procs = start(sim_dir, world)
        try:
            # Past the ranks' start (the spec's timeout_s), then the rounds.
            deadline = spec.runtime.timeout_s + 120 + 3.0 * opt.rounds * world
            notes = watch(procs, sim_dir, opt.rounds, on_round, deadline_s=deadline)
        finally:
            kill_all(procs)
        results = {}
        for rank in range(world):
            path = sim_dir / f"rank{rank}.json"
            results[rank] = json.loads(path.read_text()) if path.exists() else {
                "rank": rank, "error": _log_tail(sim_dir / f"rank{rank}.log") or "no result (killed)"}
        return Outcome(prep, opt, results, {i: p.returncode for i, p in enumerate(procs)},
                       time.monotonic() - t0, sim_dir, notes)


def _log_tail(path: Path) -> str:
    if not path.exists():
        return ""
    lines = path.read_text().strip().splitlines()
    return "\n".join(lines[-3:])
