"""Pipeline parallelism in a real vLLM with specplan's plugin: token-identical to the same run
without it, never refused. Each case first runs vLLM without the plugin (shared per
configuration, conftest.Baselines); a configuration vLLM's CPU build cannot run is skipped with
vLLM's own error. The plugin's run must then complete with the same token ids, every rank
writing its trace and `specplan diff` reading them without divergence: a refusal fails.

(Before the fix this lane now guards, every TP x PP plan without speculation was refused: the
plan named method none's token `next_token` and the plugin looked for `next_token_ids`.)

TP 1 x PP 2 runs on every submission (marker real_engine); the wider runs (TP 2 x PP 2: four
ranks on the lane's two cores, and more methods under PP) are run by hand (marker
wide_engine, `pytest -m wide_engine`): docs/engines.md has their times.
"""

from __future__ import annotations

import pytest

from tests.real_engine import lane

PLAN_METHOD = {None: "none", "draft_model": "standalone", "eagle3": "eagle3"}
REAL, WIDE = pytest.mark.real_engine, pytest.mark.wide_engine  # each case is one or the other
CASES = [pytest.param(1, None, id="tp1-pp2-no-spec", marks=REAL),
         pytest.param(1, "draft_model", id="tp1-pp2-draft_model", marks=REAL),
         pytest.param(1, "eagle3", id="tp1-pp2-eagle3", marks=WIDE),
         pytest.param(2, None, id="tp2-pp2-no-spec", marks=WIDE),
         pytest.param(2, "draft_model", id="tp2-pp2-draft_model", marks=WIDE)]


@pytest.mark.parametrize("tp,method", CASES)
def test_pp2_with_the_plugin_is_token_identical(python, models, baselines, tmp_path, tp, method):
    ranks = tp * 2
    base = baselines.get(ranks, tp=tp, pp=2, method=method)
    trace = tmp_path / "trace"
    body = lane.spec(f"tiny-tp{tp}-pp2-{PLAN_METHOD[method]}", tp=tp, pp=2, method=PLAN_METHOD[method],
                     trace_dir=trace)
    run = lane.generate(python, lane.engine_args(models, tp=tp, pp=2, method=method), ranks=ranks,
                        plan=lane.compile_plan(body, tmp_path))
    print(f"TP{tp} x PP2 {method}: without the plugin {base.wall_s:.0f} s, with it {run.wall_s:.0f} s")
    lane.assert_identical(run.tokens if run.rc == 0 else None, base.tokens, [ln for _, ln in run.lines],
                          trace, ranks)
