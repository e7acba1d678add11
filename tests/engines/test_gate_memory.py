"""The DSpark free-memory gate as specplan's SGLang rows declare it (specplan/engines/sglang/
gates.py) against SGLang 0.5.23's real SpecTpSync.available_memory_gb
(tests/engines/gate_memory_probe.py): where the real function reduces the reading over the
draft's capture group, specplan's `behaviour: engine` plan agrees the gate over that group, and
where it leaves each rank its own reading (SpecTpSync on a one-rank group, or the site off),
specplan's plan says no group agrees it and check reports the ERROR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli

pytestmark = pytest.mark.engines
HERE = Path(__file__).resolve().parent
MOE = "model: {num_layers: 8, hidden_size: 64, vocab_size: 512, moe: {num_experts: 8, top_k: 2}}\n"
# (topology, SGLANG_SPEC_TP_SYNC / sync.policy, SpecTpSync's group size, the capture group size)
CASES = [
    ("{tp: 8, dp: 8, dp_attention: true, dp_lm_head: true, device: cuda}", "all", 1, 8),
    ("{tp: 8, device: cuda}", "all", 8, 8),
    ("{tp: 8, device: cuda}", "off", 8, 8),
    ("{tp: 8, device: cuda}", "init", 8, 8),
]


def _probe(cases) -> list[dict]:
    proc = subprocess.run([sys.executable, str(HERE / "gate_memory_probe.py"), json.dumps(cases)],
                          capture_output=True, text=True, timeout=600, cwd=HERE,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _specplan(tmp_path, i: int, topology: str, policy: str) -> tuple[str | None, int]:
    spec = tmp_path / f"c{i}.yaml"
    spec.write_text(f"name: c{i}\nengine: sglang\nbehaviour: engine\ntopology: {topology}\n{MOE}"
                    "speculative: {method: dspark, num_steps: 3, sampling: greedy, aux_layers: [1, 3, 5]}\n"
                    f"sync: {{policy: {policy}}}\n")
    gates = json.loads(cli("explain", str(spec), "--json").stdout)["round"]["gates"]
    gate = next(g for g in gates if g["gate"] == "dspark_draft_graph_mem")
    return gate["family"], cli("check", str(spec), code=(0, 3)).returncode


def test_specplan_agrees_the_memory_gate_exactly_where_sglang_reduces_the_reading(tmp_path):
    engine = _probe([[sync, capture, value] for _, value, sync, capture in CASES])
    assert [e["min_over"] for e in engine] == [None, "capture", None, "capture"]
    for i, ((topology, value, _, _), real) in enumerate(zip(CASES, engine)):
        family, code = _specplan(tmp_path, i, topology, value)
        assert (family is None) == (real["min_over"] is None), (topology, value, family)
        if family is None:
            assert code == 3  # a rank-local reading selecting a TP-wide capture: the ERROR
