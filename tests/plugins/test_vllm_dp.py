"""The vLLM plugin on vLLM's independent data-parallel ranks (a dense model: each DP rank is an
engine of its own, vllm/v1/engine/core.py `reconfigure_for_independent_dp_rank`): a plan for
dp > 1 in one world is refused naming the plan that binds; a single replica's plan binds in
every DP engine, DP rank d > 0 tracing under SPECPLAN_TRACE_DIR/dp<d>. The real engine runs
both in tests/real_engine/test_dp.py (marker wide_engine)."""

from __future__ import annotations

import os
from types import SimpleNamespace as NS

import pytest

import specplan
from specplan.plugins.common import EngineRefused
from specplan.plugins.vllm import independent_dp


def _active(dp: int):
    plan = specplan.load({"name": f"dp{dp}", "engine": "vllm", "topology": {"tp": 1, "dp": dp},
                          "model": {"num_layers": 4, "hidden_size": 256, "vocab_size": 1024},
                          "speculative": {"method": "none"}, "runtime": {"max_batch": 4}}).compile()
    return NS(plan=plan, name=plan.name, path="plan.json", world_size=plan.world_size)


def _config(index: int, moe: bool = False):
    return NS(parallel_config=NS(data_parallel_index=index), model_config=NS(is_moe=moe))


def test_a_dp2_plan_on_a_dense_model_is_refused_naming_the_plan_that_binds():
    with pytest.raises(EngineRefused, match=r"rank 0: plan 'dp2' \(plan.json\) is for dp 2 in one world of 2 "
                                            r"ranks, .* an engine of its own \(1 ranks\): compile the plan "
                                            r"with topology.dp 1 and start vLLM with --data-parallel-size 2"):
        independent_dp(_active(2), _config(1), 1, 0)


def test_a_moe_model_keeps_one_world_across_dp(monkeypatch):
    monkeypatch.setenv("SPECPLAN_TRACE_DIR", "/t")
    independent_dp(_active(2), _config(1, moe=True), 2, 1)  # vLLM's DPEngineCoreProc: one world
    assert os.environ["SPECPLAN_TRACE_DIR"] == "/t"


@pytest.mark.parametrize("index,expected", [(0, "/t"), (1, "/t/dp1")])
def test_each_dp_engine_traces_apart(monkeypatch, index, expected):
    monkeypatch.setenv("SPECPLAN_TRACE_DIR", "/t")
    independent_dp(_active(1), _config(index), 1, 0)
    assert os.environ["SPECPLAN_TRACE_DIR"] == expected
