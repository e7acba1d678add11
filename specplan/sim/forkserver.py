"""Rank processes forked from a warm server: imports paid once, not once per rank.

A rank's start was mostly its imports (torch and triton: about 4 CPU-seconds; an engine's modules
several more), paid by every rank of every run on a machine of two cores. A `ForkServer` is one
Python process that imports its `preload` once and then forks a child per `spawn`: the child
starts with those modules imported, runs `module:function(*args)` and exits with its status.

    server = ForkServer.shared(preload=("torch", "triton"))
    child = server.spawn("specplan.sim.launch:_rank_main", (module, argv, env, log, group))
    child.wait(timeout=60); child.returncode     # Popen's: -N when signal N ended it

Servers are shared by what they preload (`ForkServer.shared`). Nothing outlives the parent:
the server is in a session of its own (a terminal's Ctrl-C reaches the parent alone), ends
when the parent's end of its pipe closes however the parent ends, and kills its children as
it goes; each child also gets SIGKILL when the server dies (Linux PR_SET_PDEATHSIG).

The server runs this file as a script, with the standard library only until its preload: a
preload entry is a module name (imported), or `module:function` or `(module:function, *args)`
(imported and called, e.g. to put an engine's wheel on sys.path and import its heavy modules).
`path` goes first on the server's sys.path, so its children import from it too. Nothing of
specplan's is preloaded unless asked: its Triton kernels read TRITON_INTERPRET when they are
imported, and a child's environment is its own (`env` of the child's target, set before it
imports anything).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import traceback
from typing import Sequence

_LEN = struct.Struct("!I")


def _send(fd: int, msg) -> None:
    data = pickle.dumps(msg)
    data = _LEN.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _recv(fd: int):
    """One message, or None at end of file."""
    head = _read(fd, _LEN.size)
    if head is None:
        return None
    body = _read(fd, _LEN.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _read(fd: int, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Child:
    """A forked child, with the parts of Popen the launchers use."""

    def __init__(self, server: "ForkServer", pid: int):
        self._server, self.pid = server, pid

    @property
    def returncode(self) -> int | None:
        return self._server._codes.get(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        with self._server._changed:
            self._server._changed.wait_for(lambda: self.pid in self._server._codes, timeout)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class ForkServer:
    """One warm server process (see the module's text)."""

    _shared: dict[tuple, "ForkServer"] = {}
    _lock = threading.Lock()

    @classmethod
    def shared(cls, preload: Sequence = ("torch", "triton"), path: Sequence[str] = ()) -> "ForkServer":
        """The server this process keeps for `preload` (imported with `path` first on sys.path),
        started on first use; a server that has ended is replaced."""
        key = (repr(list(preload)), tuple(map(str, path)))
        with cls._lock:
            server = cls._shared.get(key)
            if server is None or server._proc.poll() is not None:
                server = cls._shared[key] = cls(preload, path)
            return server

    def __init__(self, preload: Sequence, path: Sequence[str] = ()):
        self._proc = subprocess.Popen([sys.executable, os.path.abspath(__file__)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      start_new_session=True)
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both PIPE
        self._w, self._r = self._proc.stdin.fileno(), self._proc.stdout.fileno()
        entries = [(e,) if isinstance(e, str) else tuple(e) for e in preload]
        _send(self._w, ([str(p) for p in path], entries))
        self._codes: dict[int, int] = {}
        self._pids: list[int] = []
        self._error: str | None = None
        self._changed = threading.Condition()
        self._send_lock = threading.Lock()
        threading.Thread(target=self._listen, name="forkserver", daemon=True).start()

    def spawn(self, target: str, args: tuple = ()) -> Child:
        """Fork a child that runs `module:function(*args)`."""
        with self._send_lock:
            with self._changed:
                known = len(self._pids)
            try:
                _send(self._w, (target, tuple(args)))
            except OSError:
                pass  # the server is gone: its error, if it left one, is raised below
            with self._changed:
                self._changed.wait_for(lambda: len(self._pids) > known or self._error is not None)
                if len(self._pids) == known:
                    raise RuntimeError(f"the fork server ended: {self._error}")
                return Child(self, self._pids[known])

    def _listen(self) -> None:
        while True:
            msg = _recv(self._r)
            with self._changed:
                if msg is None:  # it ended (and killed its children): they count as killed
                    self._error = self._error or f"exit code {self._proc.wait()}"
                    for pid in self._pids:
                        self._codes.setdefault(pid, -signal.SIGKILL)
                elif msg[0] == "pid":
                    self._pids.append(msg[1])
                elif msg[0] == "exit":
                    self._codes[msg[1]] = msg[2]
                else:
                    self._error = msg[1]
                self._changed.notify_all()
            if msg is None:
                return


# The server: a script, so that nothing but its preload is imported before it forks.

def _serve() -> None:
    requests, replies = 0, 1
    out = os.dup(replies)  # the pipe to the parent; the children's stdout is theirs to set
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, replies)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        path, preload = _recv(requests)
        sys.path[:0] = path
        for target, *args in preload:
            _call(target, args)
    except BaseException:
        _send(out, ("error", f"preload failed:\n{traceback.format_exc()}"))
        raise SystemExit(1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: set[int] = set()
    try:
        while True:
            ready, _, _ = select.select([requests, wake_r], [], [])
            if wake_r in ready:
                os.read(wake_r, 4096)
            _reap(children, out)
            if requests in ready:
                msg = _recv(requests)
                if msg is None:
                    return  # the parent is gone
                pid = os.fork()
                if pid == 0:
                    os.close(wake_r)
                    os.close(wake_w)
                    _child(msg, os.getppid(), out, null)
                children.add(pid)
                _send(out, ("pid", pid))
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _reap(children: set[int], out: int) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            children.discard(pid)
            _send(out, ("exit", pid, os.waitstatus_to_exitcode(status)))


def _child(msg, server: int, out: int, null: int) -> None:
    """In the forked child: never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.close(out)
        os.dup2(null, 0)
        os.close(null)
        _die_with(server)
        target, args = msg
        _call(target, args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _die_with(server: int) -> None:
    """SIGKILL when the server dies, however it dies (Linux PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the server kills its children as it ends
        return
    if os.getppid() != server:  # it died before the prctl took hold
        os._exit(1)


def _call(entry: str, args: tuple = ()):
    import importlib

    module, _, function = entry.partition(":")
    mod = importlib.import_module(module)
    return getattr(mod, function)(*args) if function else mod


if __name__ == "__main__":
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        del sys.path[0]  # this file's folder, specplan/sim/, whose modules' names are common
    _serve()
