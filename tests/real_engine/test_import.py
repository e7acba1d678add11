"""The start-up check on an imported plan: `specplan import` of the launch line the engine then
runs, compiled, and the engine starts with it (its own EAGLE3 draft's tap ids included, which
import reads from the draft's config.json beside its local path) and generates the tokens it
generates without the plugin.
"""

from __future__ import annotations

import json

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine


def _launch_line(models) -> list[str]:
    args = lane.engine_args(models, tp=2, method="eagle3")
    return ["vllm", "serve", args["model"], "--tensor-parallel-size", "2", "--max-num-seqs", "4",
            "--dtype", "float32", "--speculative-config", json.dumps(args["speculative_config"])]


def test_engine_starts_on_a_plan_imported_from_its_launch_line(python, models, baselines, tmp_path):
    imported = tmp_path / "imported.yaml"
    proc = lane.specplan_cli("import", "--engine", "vllm", "-o", str(imported), "--", *_launch_line(models))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = tmp_path / "plan"
    proc = lane.specplan_cli("compile", str(imported), "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    base = baselines.get(2, tp=2, method="eagle3")
    run = lane.generate(python, lane.engine_args(models, tp=2, method="eagle3"), ranks=2,
                        plan=out / "plan.json")
    assert run.rc == 0, f"the engine refused the imported plan (exit {run.rc}):\n{run.tail()}"
    assert run.tokens == base.tokens
