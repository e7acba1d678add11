"""TP 1 x PP 2 in a real vLLM with specplan's plugin: token-identical, or refused at start-up
with one line; never an exit 0 with other tokens (vLLM 0.32's PPHandler once made the hook
raise on every step, vLLM dropped the error and the run went on with wrong tokens).

With speculation only where vLLM's CPU build runs it without the plugin (else skipped, with
vLLM's own reason).
"""

from __future__ import annotations

import re

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine

CASES = [("none", None), ("standalone", "draft_model")]


def _baseline(python, models, method):
    run = lane.generate(python, lane.engine_args(models, pp=2, method=method), ranks=2)
    if run.rc != 0 or not run.tokens:
        last = next((ln for _, ln in reversed(run.lines) if "Error" in ln), run.tail(1))
        pytest.skip(f"vLLM's CPU build does not run TP1 x PP2 with {method}: {last.strip()}")
    return run


@pytest.mark.parametrize("plan_method,method", CASES, ids=["no-spec", "draft_model"])
def test_pp2_with_the_plugin_is_identical_or_refused(python, models, tmp_path, plan_method, method):
    base = _baseline(python, models, method)
    trace = tmp_path / "trace"
    plan = lane.compile_plan(lane.spec(f"tiny-pp2-{plan_method}", pp=2, method=plan_method,
                                       trace_dir=trace), tmp_path)
    run = lane.generate(python, lane.engine_args(models, pp=2, method=method), ranks=2, plan=plan)
    if run.rc == 0:
        assert run.tokens == base.tokens, "exit 0 with other tokens than without the plugin"
        assert sorted(p.name for p in trace.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]
        return
    # One refusal, printed by each rank that refused (their lines differ only in the rank).
    refusals = {re.sub(r"rank \d+", "rank N", ln[ln.index("specplan: "):])
                for _, ln in run.lines if "specplan: " in ln}
    assert run.result is None, "a refused engine generated"
    assert len(refusals) == 1, f"not one refusal line (exit {run.rc}):\n{run.tail()}"
