"""`specplan simulate DEPLOYMENT --inject gate` / `gate:<name>` runs each instance's gates as
`simulate SPEC` runs one spec's (issue 34 item 4, for a prefill/decode pair): a decode instance
whose engine leaves DSpark's start-up memory gate to each rank (`behaviour: engine`, the
`dspark-mem` site off) ends in GateMismatch naming the gate, the group it selects and the engine
function, as check's ERROR says; specplan's plan of the same pair passes. Real gloo ranks
(prefill tp 2 -> decode tp 2, four processes, a few seconds each)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import cli

GATE = "dspark_draft_graph_mem"


def deployment(tmp_path: Path, decode: str) -> str:
    path = tmp_path / "dep.yaml"
    path.write_text("name: dep\nengine: sglang\n"
                    "model: {num_layers: 6, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: dspark, num_steps: 3, sampling: greedy}\n"
                    "instances:\n  prefill: {name: p, topology: {tp: 2}}\n"
                    f"  decode: {{name: d, topology: {{tp: 2}}{decode}}}\n")
    return str(path)


def _gate_errors(dep: str) -> list[str]:
    run = cli("check", dep, "--json", code=(0, 3))
    return [f["gate"] for f in _findings(json.loads(run.stdout))
            if f.get("gate") and f["severity"] == "ERROR"]


def _findings(doc) -> list[dict]:
    """Every finding of a deployment's check report, wherever it nests."""
    if isinstance(doc, dict):
        return ([doc] if "severity" in doc else []) + [f for v in doc.values() for f in _findings(v)]
    if isinstance(doc, list):
        return [f for v in doc for f in _findings(v)]
    return []


def _sim(dep: str, inject: str, *extra: str):
    return cli("simulate", dep, "--rounds", "2", "--requests", "2", "--inject", inject, *extra)


def test_a_gate_the_decode_engine_leaves_to_each_rank_fails_by_name(tmp_path):
    dep = deployment(tmp_path, ", behaviour: engine, sync: {policy: off}")
    assert _gate_errors(dep) == [GATE]
    run = _sim(dep, f"gate:{GATE}", "--allow-errors")
    out = " ".join(run.stdout.split())
    assert run.returncode == 3, out[-2000:]
    assert f"inject gate:{GATE}" in out
    for rank in (0, 1):
        assert (f"rank {rank}: GateMismatch: gate {GATE} (startup, round 0, agreed by no group) "
                "selects capture over tp [0, 1]") in out, out[-2000:]
    assert "DSparkWorkerV2.init_cuda_graphs" in out


def test_specplans_plan_of_the_pair_passes_every_gate(tmp_path):
    dep = deployment(tmp_path, "")
    assert _gate_errors(dep) == []
    run = _sim(dep, "gate")
    assert run.returncode == 0 and "PASS" in run.stdout, run.stdout[-2000:]


def test_a_gate_neither_instance_takes_is_bad_input(tmp_path):
    dep = deployment(tmp_path, "")
    run = cli("simulate", dep, "--inject", "gate:dp_padding_mode")
    assert run.returncode == 2
    assert f"the plan has no gate 'dp_padding_mode'; its gates: {GATE}" in run.stderr
