"""The plan's engine release against the one the vLLM plugin runs in (issue 37): plan.json
names the release its spec named (absent: the newest), the plugin logs one line when they
differ and refuses when the running release builds one of the plan's families otherwise."""

from __future__ import annotations

import dataclasses

import pytest

import specplan
from specplan.engines.releases import newest
from specplan.plan.model import FamilyRule, Rule
from specplan.plugins.release import release_difference

SPEC = {"name": "tp2pp2", "engine": "vllm", "topology": {"tp": 2, "pp": 2},
        "model": {"num_layers": 4, "hidden_size": 256, "vocab_size": 1024},
        "speculative": {"method": "none"}, "runtime": {"max_batch": 4}}


def _plan(version: str | None = None):
    return specplan.load({**SPEC, **({"engine_version": version} if version else {})}).compile()


def test_the_plan_names_an_older_release_and_leaves_the_newest_unsaid():
    assert _plan("0.32.0").engine_version == "0.32.0"
    assert "engine_version" not in _plan().to_json()
    assert "engine_version" not in _plan(newest("vllm")).to_json()


def test_the_same_release_says_nothing():
    assert release_difference("vllm", _plan(), newest("vllm") + "+cpu") == (None, None)
    assert release_difference("vllm", _plan("0.32.0"), "0.32.0") == (None, None)


def test_another_release_is_one_log_line_and_binds_when_its_groups_agree():
    line, refusal = release_difference("vllm", _plan(), "0.32.0+cpu")
    assert line == (f"plan 'tp2pp2' was made for vLLM {newest('vllm')}; this is vLLM 0.32.0+cpu "
                    "(the start-up check compares every group it builds with the plan)")
    assert refusal is None


def test_an_unmodelled_release_is_logged_and_left_to_the_start_up_check():
    line, refusal = release_difference("vllm", _plan("0.32.0"), "0.29.0")
    assert "was made for vLLM 0.32.0; this is vLLM 0.29.0" in line and refusal is None


def test_a_release_that_builds_a_family_otherwise_is_refused():
    plan = _plan("0.32.0")
    # the plan's tp family as another release might have laid it out: ranks 0,2 and 1,3
    families = tuple(dataclasses.replace(f, rule=Rule(shape=(2, 2), strides=(1, 2), group_ndim=1))
                     if f.name == "tp" else f for f in plan.families)
    assert all(isinstance(f, FamilyRule) for f in families)
    _, refusal = release_difference("vllm", dataclasses.replace(plan, families=families), "0.33.0")
    assert refusal is not None
    assert refusal.startswith("plan 'tp2pp2' was made for vLLM 0.32.0, whose groups vLLM 0.33.0 "
                              "builds otherwise: tp [[0, 1], [2, 3]] (the plan's: [[0, 2], [1, 3]])")


def test_the_plugin_logs_the_line_and_refuses_where_the_groups_differ(caplog):
    import logging

    import specplan.plugins.vllm as plugin
    from specplan.plugins.common import EngineRefused

    plan = _plan("0.32.0")
    caplog.set_level(logging.INFO, logger="specplan")
    plugin._check_release(dataclasses.make_dataclass("A", ["plan"])(plan), "0.33.0")
    assert [r.getMessage() for r in caplog.records] == [
        "plan 'tp2pp2' was made for vLLM 0.32.0; this is vLLM 0.33.0 (the start-up check compares "
        "every group it builds with the plan)"]
    families = tuple(dataclasses.replace(f, rule=Rule(shape=(2, 2), strides=(1, 2), group_ndim=1))
                     if f.name == "tp" else f for f in plan.families)
    other = dataclasses.make_dataclass("A", ["plan"])(dataclasses.replace(plan, families=families))
    with pytest.raises(EngineRefused, match="whose groups vLLM 0.33.0 builds otherwise: tp"):
        plugin._check_release(other, "0.33.0")
