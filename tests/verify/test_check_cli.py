"""`specplan check` through the real CLI: one spec per failure class, its exact findings.

Each tests/verify/specs/<name>.yaml sits beside <name>.expected.json: the exit code and the
full findings (severity, site, decision, group, ranks, round, line, message, fix). Regenerate
with SPECPLAN_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
SPECS = Path(__file__).parent / "specs"
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"
CASES = sorted(SPECS.glob("*.yaml"))


def _check(target: str) -> tuple[int, list[dict]]:
    run = cli("check", target, "--json", cwd=ROOT, code=(0, 3))
    return run.returncode, json.loads(run.stdout)["findings"]


def test_one_spec_per_class():
    names = {p.stem for p in CASES}
    assert len([n for n in names if n.startswith("error-")]) == 10
    assert len([n for n in names if n.startswith("warn-")]) == 6


@pytest.mark.parametrize("spec", CASES, ids=lambda p: p.stem)
def test_check_finds_exactly(spec: Path):
    rc, findings = _check(str(spec.relative_to(ROOT)))
    expected_path = spec.with_suffix(".expected.json")
    got = {"exit": rc, "findings": findings}
    if UPDATE:
        expected_path.write_text(json.dumps(got, indent=1) + "\n")
    expected = json.loads(expected_path.read_text())
    assert got == expected
    severity = "ERROR" if spec.stem.startswith("error-") else "WARN"
    assert rc == (3 if severity == "ERROR" else 0)
    assert any(f["severity"] == severity for f in findings)


def test_compile_refuses_an_error_spec(tmp_path):
    spec = SPECS / "error-drafts-not-relayed.yaml"
    run = cli("compile", str(spec), "--out", str(tmp_path / "out"), process=True)
    assert run.returncode == 3
    assert "no plan written" in run.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_check_reads_a_compiled_plan(tmp_path):
    spec = SPECS / "warn-sglang-eagle-greedy-cuda.yaml"
    run = cli("compile", str(spec), "--out", str(tmp_path), process=True)
    assert run.returncode == 0, run.stderr
    plan = tmp_path / "plan.json"
    rc, findings = _check(str(plan))
    assert (rc, findings) == _check(str(spec))


def _bad(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_malformed_plan_json(tmp_path):
    path = _bad(tmp_path, "plan.json", '{"schema_version": 1,\n  "name": }\n')
    run = cli("check", path, process=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"{path}:2:11: malformed JSON: Expecting value"


def test_wrong_schema_version(tmp_path):
    path = _bad(tmp_path, "plan.json", '{"schema_version": 7}')
    run = cli("check", path, process=True)
    assert run.returncode == 2
    assert run.stderr.strip() == (f"{path}: not a specplan plan: expected schema_version 3, "
                                  "found 7")


def test_missing_plan_file(tmp_path):
    path = str(tmp_path / "nowhere.json")
    run = cli("check", path, process=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"{path}: no such file"
