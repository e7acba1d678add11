"""`simulate` under torchrun: each process is one rank; two "nodes" on 127.0.0.1 (slow)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import UNWRAPPED, cli

ROOT = Path(__file__).resolve().parents[2]
TP4 = """
name: eagle-tp4
engine: sglang
topology: {tp: 4}
model: {num_layers: 4, hidden_size: 64, vocab_size: 512}
speculative: {method: eagle, num_steps: 3}
"""
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1", COLUMNS=UNWRAPPED)


def test_a_world_size_that_is_not_the_specs_exits_2_naming_both(tmp_path):
    spec = tmp_path / "tp4.yaml"
    spec.write_text(TP4)
    env = dict(_env(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_port()))
    done = cli("simulate", spec, process=True, program="specplan", env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (f"{spec}: torchrun started 2 ranks (WORLD_SIZE=2), but spec eagle-tp4 is "
                           "for 4 ranks: start --nnodes x --nproc-per-node = 4 processes\n")


def _two_nodes(tmp_path, text: str, per_node: int, *args: str) -> list[subprocess.CompletedProcess]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    port = _port()
    nodes = [subprocess.Popen([*TORCHRUN, "--nnodes", "2", "--nproc-per-node", str(per_node),
                               "--node-rank", str(r), "--master-addr", "127.0.0.1",
                               "--master-port", str(port), "-m", "specplan", "simulate", str(spec),
                               *args], env=_env(), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    out = []
    for r, p in enumerate(nodes):
        stdout, stderr = p.communicate(timeout=600)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _worker_codes(node: subprocess.CompletedProcess) -> set[int]:
    """The exit codes torchrun's failure summary reports for the node's ranks."""
    return {int(c) for c in re.findall(r"exitcode\s*:\s*(-?\d+)", node.stderr)}


@pytest.mark.slow
def test_two_nodes_simulate_a_four_rank_spec_and_rank_0_reports(tmp_path):
    node0, node1 = _two_nodes(tmp_path, TP4, 2, "--rounds", "3")
    assert (node0.returncode, node1.returncode) == (0, 0), node0.stderr + node1.stderr
    assert node0.stdout.splitlines()[0].startswith("eagle-tp4: world 4, 1 replica(s), method eagle")
    assert "PASS: every replica's ranks agreed on every decision (4 requests); 4 requests " \
           "token-identical to plain greedy decoding" in node0.stdout
    assert node1.stdout == ""  # global rank 0 alone prints the report


def test_a_spec_the_engine_refuses_to_launch_fails_by_that_refusal_under_allow_errors(tmp_path):
    """As without torchrun: the engine's launch is the failure, and no rank runs a round."""
    spec = tmp_path / "pp2.yaml"
    spec.write_text("name: pp2\nengine: sglang\ntopology: {tp: 1, pp: 2, device: cpu}\n"
                    "model: {num_layers: 4, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: eagle3, num_steps: 2}\n")
    env = dict(_env(), RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_port()))
    done = cli("simulate", spec, "--allow-errors", process=True, program="specplan", env=env,
               cwd=tmp_path, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.startswith("FAIL: sglang refuses to launch this topology: SGLang runs "
                                  "speculative decoding under pipeline parallel (pp=2)")


@pytest.mark.slow
def test_a_divergence_exits_3_on_every_rank_of_both_nodes(tmp_path):
    text = TP4 + "sync: {policy: \"off\"}\n"
    node0, node1 = _two_nodes(tmp_path, text, 2, "--rounds", "3", "--inject", "noise")
    assert "FAIL" in node0.stdout and "ProbeMismatch" in node0.stdout
    assert node0.returncode != 0 and node1.returncode != 0
    assert _worker_codes(node0) == {3} and _worker_codes(node1) == {3}


@pytest.mark.slow
def test_two_nodes_of_the_wrong_size_exit_2_alike(tmp_path):
    node0, node1 = _two_nodes(tmp_path, TP4, 1, "--rounds", "3")
    for node in (node0, node1):
        assert "torchrun started 2 ranks (WORLD_SIZE=2), but spec eagle-tp4 is for 4 ranks" in node.stderr
        assert _worker_codes(node) == {2}
