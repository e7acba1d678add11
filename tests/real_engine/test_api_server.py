"""Serving: vLLM's OpenAI API server, TP 2, the draft model and specplan's plugin, on 127.0.0.1
(serve.py: `python -m vllm.entrypoints.openai.api_server`, its own session). One completion over
HTTP must equal the offline run's tokens without the plugin; the server is then stopped with
SIGINT and must leave by itself, exit 0, with every process of its session, within the bound.
"""

from __future__ import annotations

import pytest

from tests.real_engine import lane, serve

pytestmark = pytest.mark.real_engine


def _cli_args(models, port: int) -> list[str]:
    args = lane.engine_args(models, tp=2)
    return ["--host", "127.0.0.1", "--port", str(port), *serve.cli_flags(args)]


def test_http_completion_equals_the_offline_tokens(python, models, baselines, tmp_path):
    offline = baselines.get(2, tp=2)
    trace = tmp_path / "trace"
    plan = lane.compile_plan(lane.spec("tiny-tp2-serve", tp=2, trace_dir=trace), tmp_path)
    port = serve.free_port()
    run = serve.serve(python, [(_cli_args(models, port), lane.engine_env(2, plan))], port,
                      str(models / "target"), prompts=lane.PROMPTS[:1])
    lane.assert_identical(run.tokens, offline.tokens[:1], run.lines, trace, 2)
    assert run.clean, "the server's engine processes outlived it:\n" + run.tail()
    assert run.rcs == [0], f"the server exited {run.rcs} on SIGINT:\n" + run.tail(30)
