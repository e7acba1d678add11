"""`specplan export` of every spec in specs/ on both engines, against golden files.

Regenerate with SPECPLAN_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

from pathlib import Path

import os

import pytest

SPECS = sorted((Path(__file__).resolve().parents[2] / "specs").glob("*.yaml"))


GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
CASES = [(spec, engine) for spec in SPECS for engine in ("sglang", "vllm")]


def _record(result) -> str:
    return f"exit: {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


@pytest.mark.parametrize("spec,engine", CASES, ids=[f"{s.stem}.{e}" for s, e in CASES])
def test_export_matches_golden(cli, spec, engine):
    got = _record(cli("export", str(spec.relative_to(spec.parents[1])), "--engine", engine))
    path = os.path.join(GOLDEN, f"{spec.stem}.{engine}.txt")
    if os.environ.get("SPECPLAN_UPDATE_GOLDEN"):
        with open(path, "w") as fh:
            fh.write(got)
    with open(path) as fh:
        assert got == fh.read(), f"{path} differs; rerun with SPECPLAN_UPDATE_GOLDEN=1 and review"


def test_default_engine_is_the_specs(cli):
    spec = "specs/deepseek-v4-dspark-tp8-dp8.yaml"
    assert cli("export", spec).stdout == cli("export", spec, "--engine", "sglang").stdout


def test_sglang_sync_matches_plan_sites(cli, write_spec):
    spec = write_spec("""\
        name: dspark-rng
        engine: sglang
        topology: {tp: 4}
        model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
        speculative: {method: dspark, num_steps: 3, sampling: mixed}
        sync: {policy: rng}
        """)
    out = cli("export", str(spec)).stdout
    assert "export SGLANG_SPEC_TP_SYNC=rng  #" in out
    spec2 = write_spec("""\
        name: dspark-noplan
        engine: sglang
        topology: {tp: 4}
        model: {num_layers: 8, hidden_size: 64, vocab_size: 1000}
        speculative: {method: dspark, num_steps: 3}
        sync: {policy: all, sites: {dspark_plan: off}}
        """, "b.yaml")
    out = cli("export", str(spec2)).stdout
    assert "export SGLANG_SPEC_TP_SYNC=all,-dspark-plan  #" in out
    assert "the plan converges dspark_plan_verify, which SGLang cannot converge" in out
