"""The Python API (`specplan.load`) gives what the commands give, and imports no torch for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import specplan
from specplan.errors import SpecError
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = "specs/kimi-k3-dspark-tp8-pp2.yaml"
SMALL = {"name": "small", "engine": "sglang", "topology": {"tp": 2},
         "model": {"num_layers": 4, "hidden_size": 64, "vocab_size": 128},
         "speculative": {"method": "eagle", "num_steps": 2}}


def test_explain_check_export_equal_the_commands(at_root):
    d = specplan.load(SPEC)
    assert d.explain() == json.loads(cli("explain", SPEC, "--json", catch=False, code=(0, 3)).output)
    assert [f.to_dict() for f in d.check()] == json.loads(cli("check", SPEC, "--json", catch=False, code=(0, 3)).output)["findings"]
    assert d.export("vllm") == cli("export", SPEC, "--engine", "vllm", catch=False, code=(0, 3)).output


def test_compile_writes_the_plan_the_command_writes(at_root, tmp_path):
    plan = specplan.load(SPEC).compile(tmp_path / "api")
    cli("compile", SPEC, "-o", str(tmp_path / "cli"), catch=False, code=(0, 3))
    written = (tmp_path / "api" / "plan.json").read_text()
    assert written == (tmp_path / "cli" / "plan.json").read_text()
    assert json.loads(written)["fingerprint"] == plan["fingerprint"]


def test_a_dict_is_a_spec():
    d = specplan.load(SMALL)
    assert d.name == "small" and d.check() == [] and d.explain()["world_size"] == 2


def test_bad_input_raises_with_every_diagnostic():
    with pytest.raises(SpecError) as info:
        specplan.load({"name": "x", "engine": "sglang", "topology": {"tp": 2, "pp": 0}})
    text = "\n".join(map(str, info.value.diagnostics))
    assert "missing required key 'model'" in text and "topology.pp" in text
    assert text.startswith("<dict>:")


def test_compile_refuses_an_error_plan(tmp_path):
    d = specplan.load(str(ROOT / "tests/verify/specs/error-drafts-not-relayed.yaml"))
    with pytest.raises(specplan.errors.PlanError):
        d.compile(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_no_torch_until_simulate():
    code = ("import sys, specplan; d = specplan.load('specs/kimi-k3-dspark-tp8-pp2.yaml'); "
            "d.explain(); d.check(); d.compile(); d.export(); "
            "print([m for m in ('torch', 'triton') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_the_readme_sweep_runs_and_is_sorted():
    run = subprocess.run([sys.executable, "examples/sweep_64_gpus.py"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    head, columns, *rows = run.stdout.splitlines()
    count = int(head.split()[0])
    assert count == len(rows) > 0 and columns.split() == ["layout", "collectives", "bytes/round", "warnings"]
    keys = [(int(r.split()[2]), int(r.split()[1])) for r in rows]
    assert keys == sorted(keys)
    for row in rows:
        tp, pp, dp, ep = (int(part.lstrip("tpde")) for part in row.split()[0].split("-"))
        assert tp * pp == 64 and tp % dp == 0


@pytest.mark.slow
def test_simulate_through_the_api():
    report = specplan.load(SMALL).simulate(rounds=4, requests=2)
    assert report.ok, report.problems
    assert report.world_size == 2 and report.requests_checked == 2
