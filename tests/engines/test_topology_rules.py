"""Each engine's topology rules on a table of accepted and refused topologies (topologies.py).

A refused topology fails to load with exit 2, at the key the engine refuses, naming the
engine function that refuses it; an accepted one loads, plans and checks clean of engine
refusals. SGLang dp without DP-attention loads with a WARN in explain and check.
"""

from __future__ import annotations

import json

import pytest
from topologies import CASES, Case

from specplan.engines import convention
from specplan.errors import SpecError
from specplan.passes import plan
from specplan.schema import load_spec
from tests.helpers import cli

CITES = {"sglang": "(SGLang 0.5.23 ", "vllm": "(vLLM 0.33.0 "}
SPEC_ONLY = ("need a mixture-of-experts model", "needs a mixture-of-experts model",
             "is an sglang option", "more than a")  # specplan's own rules, no engine function


def write(tmp_path, case: Case):
    path = tmp_path / f"{case.id}.yaml"
    path.write_text(json.dumps(case.spec()))  # JSON is YAML
    return path


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.engine}-{c.id}")
def test_specplan_refuses_what_the_engine_refuses(tmp_path, case: Case):
    path = write(tmp_path, case)
    if case.refused_at is None:
        spec = load_spec(path)
        plan(spec)
        assert convention(case.engine).violations(spec) == []
        return
    with pytest.raises(SpecError) as err:
        load_spec(path)
    found = {d.path: d.message for d in err.value.diagnostics}
    assert case.refused_at in found, found
    message = found[case.refused_at]
    assert CITES[case.engine] in message or any(s in message for s in SPEC_ONLY), message


def test_a_refusal_is_exit_2_with_the_engine_function(tmp_path):
    case = next(c for c in CASES if c.id == "issue-tp8-pcp2-dcp4")
    result = cli("check", str(write(tmp_path, case)))
    assert result.exit_code == 2
    assert ("topology.dcp: dcp=4 with cp=2, tp=8: DCP must be off, span the PCP axis or span the "
            "whole TP x PCP axis, valid dcp: 1, 2, 16 (vLLM 0.33.0 "
            "ParallelConfig._validate_parallel_config)") in result.output


WARN = ("dp=2 without dp_attention starts 2 independent worlds of tp*pp = 4 ranks: 8 GPUs on one "
        "node (SGLang 0.5.23 check_server_args")


def test_independent_worlds_warn_in_explain_and_check(tmp_path):
    case = next(c for c in CASES if c.id == "dp-replicas-on-one-node")
    path = str(write(tmp_path, case))
    explained = cli("explain", path, "--json")
    assert explained.exit_code == 0
    assert json.loads(explained.output)["warnings"][0].startswith(WARN)
    assert "WARN " + WARN in cli("explain", path).output.replace("\n", " ")
    checked = cli("check", path, "--json")
    assert checked.exit_code == 0
    warns = [f["message"] for f in json.loads(checked.output)["findings"] if f["severity"] == "WARN"]
    assert any(m.startswith(WARN) for m in warns), warns


def test_one_world_has_no_world_warning(tmp_path):
    case = next(c for c in CASES if c.id == "issue-tp16-dpattn4-cp2-dcp8")
    result = cli("explain", str(write(tmp_path, case)), "--json")
    assert json.loads(result.output)["warnings"] == []
