"""`specplan export --nodes`: one line per node in each engine's own multi-node spelling, read
back by `specplan import` to the spec the one-line export imports to; lines that disagree are
refused naming the line and the field (exit 2). Everything through the CLI.

The node flags are checked against the flag tables read from the wheels (engines/<engine>/
flags/*.json): every line parses there, and the parsed values are the node's own.
"""

from __future__ import annotations

import shlex

import pytest

from specplan.ecosystem.argv import read_words
from specplan.ecosystem.launch_import import split_command
from specplan.engines import convention
from tests.ecosystem.conftest import REPO

MULTI = sorted(p for p in (REPO / "specs").glob("*.yaml") if "nodes: 2" in p.read_text())
FLASH = REPO / "specs" / "deepseek-v4-flash-mtp-tp2-pp2.yaml"  # vllm, tp 2 x pp 2, 2 nodes
PLAN = "SPECPLAN_PLAN=build/deepseek-v4-flash-mtp-tp2-pp2/plan.json"


def _export(cli, spec, *options) -> str:
    return cli("export", spec, "--nodes", *options, code=0).stdout


def _commands(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def _values(engine: str, words: list[str]) -> tuple[dict, list[str]]:
    """(the line's env words as a dict, ...) and its argparse values by the wheel's table."""
    env_words, program, rest = split_command(engine, words)
    assert program, words
    _, values = read_words(convention(engine).flag_table(), rest)
    return dict(w.partition("=")[::2] for w in env_words), values


def test_vllm_multiprocessing_lines(cli):
    lines = _commands(_export(cli, FLASH, "--head-address", "10.1.2.3:29600"))
    assert len(lines) == 2
    for node, line in enumerate(lines):
        assert line.startswith(PLAN + " ")
        env, v = _values("vllm", shlex.split(line))
        assert env["SPECPLAN_PLAN"] == "build/deepseek-v4-flash-mtp-tp2-pp2/plan.json"
        assert env["VLLM_USE_V2_MODEL_RUNNER"] == "1"
        assert (v["nnodes"], v["node_rank"], v["master_addr"], v["master_port"]) == (
            "2", str(node), "10.1.2.3", "29600")
        assert bool(v.get("headless")) == (node == 1)  # the head serves the API
        assert (v["tensor_parallel_size"], v["pipeline_parallel_size"]) == ("2", "2")
        assert "distributed_executor_backend" not in v


def test_vllm_ray_lines(cli):
    text = _export(cli, FLASH, "--executor", "ray", "--head-address", "10.1.2.3")
    head, worker = _commands(text)
    start, _, serve = head.partition(" && ")
    assert start == "ray start --head --port=6379"
    line, _, comment = serve.partition("  # ")
    env, v = _values("vllm", shlex.split(line))
    assert env["SPECPLAN_PLAN"] == "build/deepseek-v4-flash-mtp-tp2-pp2/plan.json"
    assert v["distributed_executor_backend"] == "ray"
    assert "nnodes" not in v and "node_rank" not in v  # vLLM refuses nnodes > 1 under Ray
    assert "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY" in comment and "SPECPLAN_PLAN" in comment
    assert worker == f"{PLAN} ray start --address=10.1.2.3:6379 --block"


def test_sglang_lines(cli):
    lines = _commands(_export(cli, FLASH, "--engine", "sglang"))
    assert len(lines) == 2
    for node, line in enumerate(lines):
        _, v = _values("sglang", shlex.split(line))
        assert (v["nnodes"], v["node_rank"], v["dist_init_addr"]) == (
            "2", str(node), "$HEAD_ADDR:5000")
    assert '--dist-init-addr "$HEAD_ADDR:5000"' in lines[1]  # the shell expands the variable


def test_sglang_refuses_ray(cli):
    run = cli("export", FLASH, "--nodes", "--engine", "sglang", "--executor", "ray", code=2)
    assert "--executor ray" in run.stderr and "mp" in run.stderr and not run.stdout


def test_deployment_instance_on_two_nodes(cli):
    text = cli("export", REPO / "specs" / "disagg" / "kimi-k3-dspark-pd.yaml", code=0).stdout
    prefill, decode = text.split("# decode instance")
    lines = _commands(prefill)
    assert len(lines) == 2
    assert all(line.startswith("SPECPLAN_PLAN=build/kimi-k3-dspark-pd/prefill/plan.json ")
               for line in lines)
    assert all("kv_producer" in line for line in lines)
    assert '"${args[@]}"' in decode  # one node: the one-line form


def _import(cli, engine: str, script, base, *more):
    return cli("import", "--engine", engine, "-f", script, "--base", base, *more)


@pytest.mark.parametrize("spec", MULTI, ids=lambda p: p.stem)
@pytest.mark.parametrize("engine,executor", [("vllm", "mp"), ("vllm", "ray"), ("sglang", "mp")])
def test_round_trip(cli, tmp_path, spec, engine, executor):
    """The per-node lines import to the spec the one-line export imports to, nodes included."""
    one = cli("export", spec, "--engine", engine, code=(0, 3))
    if one.returncode == 3:  # the engine cannot run the spec: --nodes refuses it alike
        run = cli("export", spec, "--engine", engine, "--nodes", "--executor", executor, code=3)
        assert run.stderr == one.stderr
        return
    (tmp_path / "one.sh").write_text(one.stdout)
    (tmp_path / "nodes.sh").write_text(_export(cli, spec, "--engine", engine, "--executor",
                                               executor))
    from_one = _import(cli, engine, tmp_path / "one.sh", spec)
    from_nodes = _import(cli, engine, tmp_path / "nodes.sh", spec)
    assert from_one.returncode == 0, from_one.stderr
    assert from_nodes.returncode == 0, from_nodes.stderr
    assert from_nodes.stdout == from_one.stdout
    assert "nodes: 2" in from_nodes.stdout


def _mutated(cli, tmp_path, spec, options, line: int, old: str, new: str):
    text = _export(cli, spec, *options)
    lines = text.splitlines()
    commands = [i for i, t in enumerate(lines) if t and not t.startswith("#")]
    at = commands[line]
    assert old in lines[at], lines[at]
    lines[at] = lines[at].replace(old, new)
    (tmp_path / "nodes.sh").write_text("\n".join(lines) + "\n")
    return at + 1, tmp_path / "nodes.sh"


@pytest.mark.parametrize("engine,options,old,new,field", [
    ("vllm", (), "--tensor-parallel-size 2", "--tensor-parallel-size 4",
     "--tensor-parallel-size: expected 2 (as line 6, node 0), found 4"),
    ("vllm", (), "plan.json", "other.json", "SPECPLAN_PLAN: expected build/"),
    ("vllm", (), "--node-rank 1", "--node-rank 0", "--node-rank: expected a node of its own"),
    ("vllm", (), " --headless", "", "--headless: expected present, found absent"),
    ("vllm", (), "--nnodes 2", "--nnodes 3", "node 1: --nnodes: expected 2 (line 6), found 3"),
    ("vllm", (), "VLLM_USE_V2_MODEL_RUNNER=1 ", "", "VLLM_USE_V2_MODEL_RUNNER: expected 1"),
    ("vllm", ("--head-address", "h1"), "--master-addr h1", "--master-addr h2",
     "--master-addr: expected h1"),
    ("vllm", ("--executor", "ray"), PLAN + " ", "", "SPECPLAN_PLAN: expected build/"),
    ("vllm", ("--executor", "ray"), "--block", "--head", "ray start: expected --address"),
    ("sglang", ("--engine", "sglang"), "--pp-size 2", "--pp-size 4",
     "--pp-size: expected 2 (as line 7, node 0), found 4"),
    ("sglang", ("--engine", "sglang"), "--node-rank 1", "--node-rank 2",
     "--node-rank: expected 0 to 1, found 2"),
    ("sglang", ("--engine", "sglang"), ":5000", ":5001", "--dist-init-addr: expected"),
])
def test_disagreeing_lines_are_refused(cli, tmp_path, engine, options, old, new, field):
    number, script = _mutated(cli, tmp_path, FLASH, options, 1, old, new)
    run = _import(cli, engine, script, FLASH)
    assert run.returncode == 2 and not run.stdout, run.output
    assert f"{script}:{number}: node " in run.stderr
    assert field in run.stderr
    assert "Traceback" not in run.output


def test_a_missing_node_is_refused(cli, tmp_path):
    text = _export(cli, FLASH)
    kept = [t for t in text.splitlines() if "--node-rank 1" not in t]
    (tmp_path / "nodes.sh").write_text("\n".join(kept) + "\n")
    run = _import(cli, "vllm", tmp_path / "nodes.sh", FLASH)
    assert run.returncode == 2 and not run.stdout
    assert f"{tmp_path / 'nodes.sh'}:6: node count: --nnodes 2, found 1 lines" in run.stderr


@pytest.mark.parametrize("options", [(), ("--executor", "ray"), ("--engine", "sglang")])
def test_fitted_to_a_terminal_the_lines_continue_and_still_import(cli, tmp_path, options):
    """At 80 columns each node's line continues with ` \\` (the shell's and import's reading are
    the line's); piped, with no width asked for, it is one physical line per node."""
    engine = "sglang" if "sglang" in options else "vllm"
    wrapped = cli("export", FLASH, "--nodes", *options, env={"COLUMNS": "80"}, code=0).stdout
    assert max(len(line) for line in wrapped.splitlines()) <= 80
    assert any(line.endswith(" \\") for line in wrapped.splitlines())
    piped = cli("export", FLASH, "--nodes", *options, env={"COLUMNS": None}, code=0).stdout
    assert len(_commands(piped)) == 2 and not any(line.endswith("\\") for line in _commands(piped))
    (tmp_path / "wrapped.sh").write_text(wrapped)
    (tmp_path / "piped.sh").write_text(piped)
    back = [_import(cli, engine, tmp_path / f"{name}.sh", FLASH) for name in ("wrapped", "piped")]
    assert [b.returncode for b in back] == [0, 0], back[0].stderr + back[1].stderr
    assert back[0].stdout == back[1].stdout
