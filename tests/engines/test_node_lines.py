"""The per-node lines `specplan export --nodes` writes, parsed by each engine's real parser
(vLLM 0.33.0's `vllm serve`, SGLang 0.5.23's launch_server; tests/engines/node_lines_probe.py)
and checked by the engine's own code where it checks them: vLLM's ParallelConfig accepts each
multiprocessing node and refuses nnodes > 1 under Ray (so the Ray head's line names no node
count); SGLang's NetworkAddress.parse reads --dist-init-addr and refuses an address without
its port (so export always writes one)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli

pytestmark = pytest.mark.engines
HERE = Path(__file__).resolve().parent
FLASH = HERE.parents[1] / "specs" / "deepseek-v4-flash-mtp-tp2-pp2.yaml"  # tp 2 x pp 2, 2 nodes


def _lines(*options) -> list[list[str]]:
    """Each node's engine arguments (after the program), as the operator's shell splits them."""
    text = cli("export", FLASH, "--nodes", "--head-address", "10.0.0.1", *options, code=0).stdout
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        words = shlex.split(line.partition(" && ")[2] or line, comments=True)
        for program in (["vllm", "serve"], ["python", "-m", "sglang.launch_server"]):
            at = next((i for i in range(len(words)) if words[i:i + len(program)] == program), None)
            if at is not None:
                out.append(words[at + len(program):])
    return out


def _probe(engine: str, lines: list[list[str]]) -> list[dict]:
    proc = subprocess.run([sys.executable, str(HERE / "node_lines_probe.py"), engine,
                           json.dumps(lines)], capture_output=True, text=True, timeout=600,
                          cwd=HERE, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                              [str(HERE), str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_vllm_multiprocessing_lines_parse_and_configure():
    rows = _probe("vllm", _lines())
    assert [(r["nnodes"], r["node_rank"], r["master_addr"], r["headless"]) for r in rows] == [
        (2, 0, "10.0.0.1", False), (2, 1, "10.0.0.1", True)]
    assert all((r["tensor_parallel_size"], r["pipeline_parallel_size"]) == (2, 2) for r in rows)
    assert [r["config"] for r in rows] == ["ok", "ok"]


def test_vllm_ray_head_line_names_the_ray_executor_and_no_node_count():
    (head,) = _probe("vllm", _lines("--executor", "ray"))  # the other node runs `ray start`
    assert (head["distributed_executor_backend"], head["nnodes"]) == ("ray", 1)
    assert head["config_nnodes_2"].startswith("refused: ")
    assert ("nnodes > 1 can only be set when distributed executor backend is mp, uni or "
            "external_launcher") in head["config_nnodes_2"]


def test_sglang_lines_parse_and_the_address_carries_its_port():
    rows = _probe("sglang", _lines("--engine", "sglang"))
    assert [(r["nnodes"], r["node_rank"], r["dist_init_addr"]) for r in rows] == [
        (2, 0, "10.0.0.1:5000"), (2, 1, "10.0.0.1:5000")]
    assert [r["parsed"] for r in rows] == ["5000", "5000"]
    assert all(r["host_only"].startswith("refused: ") for r in rows)
