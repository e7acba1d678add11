"""`specplan check PREFILL.yaml DECODE.yaml` through the real CLI (click's runner, in process): one spec pair per finding
class across instances, with its exact findings.

tests/deploy/cases/<case>/{prefill,decode}.yaml sit beside expected.json: the exit code and the
cross-instance findings (severity, kind, where in both files, message, fix). Regenerate with
SPECPLAN_UPDATE_GOLDEN=1 and review the diff. `error-*` cases hold at least one ERROR across
the instances, `warn-*` a WARN and no ERROR across them, `clean-*` nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
CASES = sorted(p for p in (Path(__file__).parent / "cases").iterdir() if p.is_dir())
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"
KINDS = {"layer-names", "pp-refused", "pull-pp", "tp-ratio", "decode-dcp", "replicated-kv", "decode-cp", "model",
         "speculative", "draft-kv", "hetero-tp", "hidden-states"}


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the expected findings name files relative to the repository


def _rel(case: Path, role: str) -> str:
    return str((case / f"{role}.yaml").relative_to(ROOT))


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_pair_finds_exactly(case: Path):
    run = cli("check", _rel(case, "prefill"), _rel(case, "decode"), "--json", catch=False)
    assert run.returncode in (0, 3), run.stderr
    got = {"exit": run.returncode, "findings": json.loads(run.stdout)["findings"]}
    expected_path = case / "expected.json"
    if UPDATE:
        expected_path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(expected_path.read_text())
    severities = {f["severity"] for f in got["findings"]}
    if case.name.startswith("error-"):
        assert "ERROR" in severities and got["exit"] == 3
    elif case.name.startswith("warn-"):
        assert severities == {"WARN"}
    else:
        assert not got["findings"] and got["exit"] == 0


def test_every_finding_class_has_a_pair():
    kinds = set()
    for case in CASES:
        kinds |= {f["kind"] for f in json.loads((case / "expected.json").read_text())["findings"]}
    assert kinds == KINDS


def test_seed_replay_names_the_layers():
    """Seed 004: the PP=2 prefiller's DSpark registered model.layers.46..50, the PP=1 decoder
    93..97, and 46..50 collide with the target's own layer names."""
    case = Path(__file__).parent / "cases" / "error-layer-names-seed-dspark-pp2-pp1"
    run = cli("check", _rel(case, "prefill"), _rel(case, "decode"), "--json", catch=False)
    (finding,) = json.loads(run.stdout)["findings"]
    assert finding["kind"] == "layer-names"
    assert "prefill stage 1 registers model.layers.46..50" in finding["message"]
    assert "decode stage 0 registers model.layers.93..97" in finding["message"]
    assert "46..50 also collide with the target's own layer names" in finding["message"]
    assert finding["where"][0].endswith("prefill.yaml:8") and finding["where"][1].endswith("decode.yaml:8")


def test_clean_deployment_says_so():
    case = Path(__file__).parent / "cases" / "clean-pp2-to-pp1"
    run = cli("check", _rel(case, "prefill"), _rel(case, "decode"), catch=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "p+d: no findings across" in run.stdout
    assert "agree on layer names, draft layers, taps, KV layout and the handoff counts" in run.stdout
