"""Preflight on compiled plans: torchrun on gloo, and a mismatch that exits 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import specs_rt

from specplan.plan import fingerprint
from tests.helpers import ROOT, compile_spec
from tests.ranks import free_port, launch

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


# tp 2 x pp 2 with column relays (issue 13): the relays send the pp family's one buffer,
# which plan.json states (relay layouts, buffer_bytes["pp"], each relay op's bytes).
TP2_PP2_COLUMN = """
name: rt-tp2-pp2-column
engine: vllm
topology: {tp: 2, pp: 2, device: cpu}
model: {num_layers: 8, hidden_size: 64, vocab_size: 512}
speculative: {method: dspark, num_steps: 5, sampling: greedy}
pipeline: {relay: column}
runtime: {max_batch: 8, timeout_s: 30}
"""


def test_column_relays_send_what_the_plan_states(tmp_path):
    path = compile_spec(tmp_path, TP2_PP2_COLUMN)
    plan = json.loads(path.read_text())
    relays = plan["pipeline"]["relay"]["sites"]
    assert relays and plan["buffer_bytes"]["pp"] == max(r["layout"]["bytes"] for r in relays)
    relay_ops = [op for c in plan["rank_classes"] for ops in c["program"].values() for op in ops
                 if op.get("site")]
    assert relay_ops and {op["bytes"] for op in relay_ops} == {plan["buffer_bytes"]["pp"]}
    results = launch(4, "preflight", path)
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
    assert "every header matched" in results[0].stdout


def test_preflight_exits_3_when_what_it_sends_differs_from_the_plan(tmp_path):
    """A planner bug (a relay op's bytes off, fingerprint restamped so the plan loads): preflight
    compares what it sends with plan.json byte for byte and names the relay."""
    path = compile_spec(tmp_path, TP2_PP2_COLUMN)
    plan = json.loads(path.read_text())
    for c in plan["rank_classes"]:
        for op in c["program"]["decode"]:
            if op.get("site") == "dspark_draft":
                op["bytes"] = 320  # the bare payload, as plan.json once said
    plan["fingerprint"] = fingerprint(plan)
    path.write_text(json.dumps(plan, indent=1))
    for r in launch(4, "preflight", path):
        assert r.returncode == 3, r.stdout + r.stderr
        assert ("WireMismatch" in r.stderr and "relay dspark_draft" in r.stderr
                and "plan.json says 320" in r.stderr), r.stderr
