"""The plugins log through `logging` (logger `specplan`): the plan loaded, each hook, every
refusal, and one line per rank when it binds the plan (issue 36 item 6, issue 38 item 6)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.plugins import EngineRefused, activate, common
from tests.helpers import ROOT

PLAN = Path(__file__).parents[1] / "golden" / "plans" / "dspark-greedy-dpattn.json"


@pytest.fixture(autouse=True)
def fresh(monkeypatch, caplog):
    monkeypatch.setattr(common, "_ACTIVE", {})
    monkeypatch.delenv("SPECPLAN_ALLOW_UNTESTED_ENGINE", raising=False)
    caplog.set_level(logging.DEBUG, logger="specplan")


def test_loading_hooking_and_binding_are_logged(monkeypatch, caplog):
    monkeypatch.setenv("SPECPLAN_PLAN", str(PLAN))
    active = activate("sglang", "0.5.23")
    for target in ("sglang.srt.distributed.parallel_state.initialize_model_parallel",
                   "sglang.srt.speculative.spec_sync.sync"):
        common.hooked(active, target)
    common.hooked(active, "sglang.srt.speculative.spec_sync.sync")  # once only
    common.log_bound(active, rank=3)
    fingerprint = active.plan.fingerprint[:16]
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("specplan", "INFO", f"loaded plan 'dspark-greedy-dpattn' (fingerprint {fingerprint}, 4 ranks) "
                             f"from SPECPLAN_PLAN={PLAN} for sglang 0.5.23"),
        ("specplan", "DEBUG", "hooked sglang.srt.distributed.parallel_state.initialize_model_parallel"),
        ("specplan", "DEBUG", "hooked sglang.srt.speculative.spec_sync.sync"),
        ("specplan", "INFO", f"rank 3 bound plan 'dspark-greedy-dpattn' (fingerprint {fingerprint}) on "
                             "sglang 0.5.23; 2 hooks: parallel_state.initialize_model_parallel, spec_sync.sync")]


def test_a_refusal_is_logged_as_an_error(monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("SPECPLAN_PLAN", str(tmp_path / "none.json"))
    with pytest.raises(EngineRefused) as err:
        activate("sglang", "0.5.23")
    (record,) = caplog.records
    assert record.levelname == "ERROR" and record.name == "specplan"
    assert f"specplan: {record.getMessage().removeprefix('refused: ')}" == str(err.value)


def test_a_process_without_logging_set_up_still_prints_the_bound_line():
    """An engine that configures only its own logger (vLLM: `vllm`) leaves the root logger
    without a handler: the specplan lines must reach stderr anyway."""
    code = ("import os; os.environ['SPECPLAN_PLAN'] = %r\n"
            "from specplan.plugins import common\n"
            "active = common.activate('sglang', '0.5.23')\n"
            "common.hooked(active, 'sglang.srt.distributed.parallel_state.initialize_model_parallel')\n"
            "common.log_bound(active, 0)\n" % str(PLAN))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2 and all("[specplan]" in line for line in lines)
    assert lines[0].startswith("INFO ") and "loaded plan 'dspark-greedy-dpattn'" in lines[0]
    assert lines[1].endswith("on sglang 0.5.23; 1 hooks: parallel_state.initialize_model_parallel")
