"""Data parallel in a real vLLM with specplan's plugin: `--data-parallel-size 2` through vLLM's
OpenAI API server (vLLM refuses `LLM(data_parallel_size=2)` in one process), the draft model.
vLLM runs each DP rank of a dense model as an engine of its own, a world of one rank here
(vllm/v1/engine/core.py `reconfigure_for_independent_dp_rank`).

The server runs first without the plugin (what vLLM's CPU build cannot serve is skipped with
vLLM's own error). Then:
- with a plan for `topology: {dp: 2}` (one world of 2 ranks), the plugin refuses, on each DP
  engine, with the line docs/engines.md documents (the plan cannot bind there);
- with the plan of one replica (`dp: 1`, which that line names), both prompts, sent at once,
  complete with the same token ids; each DP engine traced (DP rank 1 under
  SPECPLAN_TRACE_DIR/dp1), and every process of the server's session is gone after SIGINT.
"""

from __future__ import annotations

import pytest

from tests.real_engine import lane, serve

pytestmark = pytest.mark.wide_engine


def _args(models, port: int) -> list[str]:
    args = lane.engine_args(models, data_parallel_size=2)
    return ["--host", "127.0.0.1", "--port", str(port), *serve.cli_flags(args)]


def _serve(python, models, plan=None, extra=None) -> serve.Served:
    port = serve.free_port()
    return serve.serve(python, [(_args(models, port), lane.engine_env(2, plan, extra))], port,
                       str(models / "target"))


def test_dp2_server_with_the_plugin_is_token_identical(python, models, tmp_path):
    base = _serve(python, models)
    lane.skip_unless_served(base.tokens, base.lines, "--data-parallel-size 2")
    assert base.clean, "the server's processes outlived SIGINT without the plugin:\n" + base.tail()

    one_world = lane.compile_plan(lane.spec("tiny-dp2-one-world", topology={"dp": 2}), tmp_path / "dp2")
    refused = _serve(python, models, one_world)
    said = {ln[ln.index("specplan: "):] for ln in refused.lines if "specplan: rank 0: plan" in ln}
    assert said == {f"specplan: rank 0: plan 'tiny-dp2-one-world' ({one_world}) is for dp 2 in one world "
                    "of 2 ranks, but vLLM runs each data-parallel rank of a dense model as an engine of "
                    "its own (1 ranks): compile the plan with topology.dp 1 and start vLLM with "
                    "--data-parallel-size 2 on it"}, refused.tail()
    assert refused.tokens is None and refused.clean

    trace = tmp_path / "trace"
    replica = lane.compile_plan(lane.spec("tiny-dp2-replica"), tmp_path / "dp1")
    run = _serve(python, models, replica, {"SPECPLAN_TRACE_DIR": str(trace)})
    print(f"DP 2 draft_model: without the plugin {base.wall_s:.0f} s, refused {refused.wall_s:.0f} s, "
          f"with it {run.wall_s:.0f} s")
    lane.assert_identical(run.tokens, base.tokens, run.lines, trace, 1)
    assert run.clean, "the server's processes outlived SIGINT:\n" + run.tail()
    # Each DP engine bound the plan: its trace file opens at bind (one rank per replica
    # converges over no other rank, so the files stay empty, as test_offline.py's TP 1 files).
    assert (trace / "dp1" / "rank0.jsonl").is_file(), sorted(str(p) for p in trace.rglob("*"))
