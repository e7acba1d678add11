"""Preflight on compiled plans: torchrun on gloo, and a mismatch that exits 3."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from launch import ROOT, compile_spec, free_port, launch
import specs_rt

TORCHRUN = Path(sys.executable).with_name("torchrun")


def _torchrun(n: int, plan: Path) -> subprocess.CompletedProcess:
    cmd = [str(TORCHRUN), "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), "-m", "specplan.runtime.preflight", str(plan)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def test_preflight_runs_every_planned_collective_under_torchrun(tmp_path):
    plan = compile_spec(tmp_path, specs_rt.TP2_DSPARK)
    out = _torchrun(2, plan)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "preflight rt-tp2-dspark" in out.stdout and "every header matched" in out.stdout
    assert "replica          [0, 1]" in out.stdout  # per-group latency row


def test_preflight_exits_3_when_the_world_does_not_match_the_plan(tmp_path):
    plan = compile_spec(tmp_path, specs_rt.TP4_DPATTN_EAGLE)
    out = _torchrun(2, plan)
    assert "exitcode  : 3" in out.stderr  # torchrun reports each rank's code, and itself exits 1
    assert "WorldSizeMismatch: at process-group start" in out.stderr


def test_preflight_exits_3_when_ranks_hold_different_plans(tmp_path):
    a = compile_spec(tmp_path / "a", specs_rt.TP2_DSPARK)
    b = compile_spec(tmp_path / "b", specs_rt.TP2_DSPARK.replace("num_steps: 3", "num_steps: 2"))
    results = launch(2, "preflight", a, b)
    for r in results:
        assert r.returncode == 3, r.stdout + r.stderr
        assert "preflight: FingerprintMismatch: plan fingerprints differ" in r.stderr
