"""Issue 21's hostile files and options, each through the CLI: exit 2 naming the path or the
field, never a traceback; and the four output-folder defects (a plan read as a spec, a stale
runtime module, a staging folder left by SIGTERM, a replaced file's mode).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "llama-3.2-1b-eagle3-pp2.yaml"
BASE = ["--base", str(SPEC)]
VLLM = ["import", "--engine", "vllm", *BASE, "--", "vllm", "serve", "m"]


def refused(args, *expected: str) -> str:
    res = cli(*args, code=2)
    for text in expected:
        assert text in res.output, res.output
    return res.output


def write(tmp: Path, name: str, body: str | bytes) -> Path:
    path = tmp / name
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


# -- paths and sizes of input files -----------------------------------------------------------

def test_a_path_component_over_255_bytes(tmp_path):
    long = "a" * 300
    for command in ("check", "explain", "compile", "export", "simulate"):
        refused([command, tmp_path / f"{long}.yaml"], "longer than the file system allows (255 bytes)")
    spec = SPEC.read_text().replace("name: llama-3.2-1b-eagle3-pp2",
                                    f"name: pre\ndisaggregation: {{role: prefill, peer: {long}.yaml}}")
    refused(["check", write(tmp_path, "pre.yaml", spec)], "disaggregation.peer:", "(255 bytes)")
    dep = (ROOT / "specs" / "disagg" / "kimi-k3-dspark-pd.yaml").read_text()
    dep = dep.replace("    name: kimi-k3-decode\n    topology: {tp: 8}", f"    {long}.yaml").replace(
        "  decode:\n", "  decode:")
    refused(["check", write(tmp_path, "dep.yaml", dep)], "instances.decode:", "(255 bytes)")


def test_devices_fifos_and_oversized_specs(tmp_path):
    refused(["check", "/dev/zero"], "/dev/zero: is not a regular file")
    os.mkfifo(tmp_path / "fifo.yaml")
    refused(["explain", tmp_path / "fifo.yaml"], "is not a regular file")
    big = write(tmp_path, "big.yaml", SPEC.read_text() + "#" + "x" * (1 << 20) + "\n")
    refused(["check", big], "beyond specplan's limit of 1,048,576 bytes")


def test_aliases_nested_past_the_depth_limit(tmp_path):
    nest = lambda inner: "[" * 30 + inner + "]" * 30  # noqa: E731
    chain = "a0: &a0 " + nest("1") + "\n" + "".join(f"a{i}: &a{i} {nest(f'*a{i - 1}')}\n" for i in range(1, 21))
    refused(["check", write(tmp_path, "chain.yaml", SPEC.read_text() + chain)],
            "nests deeper than 32 levels once its aliases are expanded")


# -- diff --acceptance ------------------------------------------------------------------------

GOOD = {"round": 0, "site": "s", "decision": "accepted_len", "hash": 1, "request": 0, "accepted": 3,
        "fingerprint": "f" * 64}
BAD_TRACES = {
    "truncated": (json.dumps(GOOD)[:-5], "malformed JSON: Unterminated string"),
    "no-round": (json.dumps({k: v for k, v in GOOD.items() if k != "round"}), "missing key(s) 'round'"),
    "no-request": (json.dumps({k: v for k, v in GOOD.items() if k != "request"}), "missing key(s) 'request'"),
    "not-utf8": (b"\xff\xfe", "is not UTF-8 text"),
    "accepted-abc": (json.dumps(dict(GOOD, accepted="abc")), 'accepted: expected an integer, found "abc"'),
    "accepted-1e400": (json.dumps(GOOD).replace('"accepted": 3', '"accepted": 1e400'), "found Infinity"),
    "accepted-nan": (json.dumps(GOOD).replace('"accepted": 3', '"accepted": NaN'), "found NaN"),
    "accepted-negative": (json.dumps(dict(GOOD, accepted=-1)), "expected a count of tokens (>= 0)"),
    "fingerprint-object": (json.dumps(dict(GOOD, fingerprint={"a": 1})), "fingerprint: expected a string"),
    "array": ("[1, 2]", "expected a JSON object per line, found list"),
    "wrong-rank": (json.dumps(dict(GOOD, rank=7)), "the record says rank 7"),
}


def _run(tmp: Path, name: str, line: str | bytes) -> Path:
    run = tmp / name
    run.mkdir()
    write(run, "rank0.jsonl", line if isinstance(line, bytes) else line + "\n")
    write(run, "rank1.jsonl", json.dumps(GOOD) + "\n")
    return run


@pytest.mark.parametrize("case", sorted(BAD_TRACES))
def test_diff_acceptance_refuses_a_malformed_trace(tmp_path, case):
    line, expected = BAD_TRACES[case]
    a = _run(tmp_path, "a", json.dumps(GOOD))
    refused(["diff", "--acceptance", a, _run(tmp_path, "b", line)], "b/rank0.jsonl:1", expected)


@pytest.mark.parametrize("value, expected", [("nan", "expected a number, found nan"),
                                             ("inf", "not in the range"), ("101", "not in the range")])
def test_diff_acceptance_threshold_is_a_finite_percentage(tmp_path, value, expected):
    a = _run(tmp_path, "a", json.dumps(GOOD))
    refused(["diff", "--acceptance", a, a, "--threshold", value], "--threshold", expected)


# -- import -----------------------------------------------------------------------------------

def test_import_refuses_unreadable_configs(tmp_path):
    refused([*VLLM, "--config", write(tmp_path, "c.yaml", b"tensor-parallel-size: \xff\n")],
            "c.yaml:1:1: is not UTF-8 text")
    refused(["import", "--engine", "vllm", "--model-config", write(tmp_path, "m.json", b'{"a": "\xff"}'),
             "--", "vllm", "serve", "m"], "m.json:1:1: is not UTF-8 text")
    refused(["import", "--engine", "vllm", "--model-config", write(tmp_path, "l.json", "[1, 2]"),
             "--", "vllm", "serve", "m"], "l.json: it is not a JSON object")
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh"))
    refused([*VLLM, "--config", write(tmp_path, "bomb.yaml", bomb + "tensor-parallel-size: *h\n")],
            "expands past 10,000 values")


def test_import_reads_a_yaml_date_in_config_as_its_text(tmp_path):
    config = write(tmp_path, "d.yaml", "tensor-parallel-size: 2\nhf-overrides: {released: 2024-01-01}\n")
    res = cli(*VLLM, "--config", str(config))
    assert res.exit_code == 0, res.output
    assert "tp: 2" in res.output  # json.dumps of the override's date raised TypeError


@pytest.mark.parametrize("words, expected", [
    (["--pipeline-parallel-size", "0"], "--pipeline-parallel-size 0: expected a positive integer"),
    (["--nnodes", "0"], "--nnodes 0: expected a positive integer"),
    (["-tp", "-2"], "expected a positive integer"),
    (["--speculative-config.method", "eagle3", "--speculative-config.num_speculative_tokens", "abc"],
     "num_speculative_tokens expects an integer, found 'abc'"),
])
def test_import_refuses_sizes_the_line_cannot_mean(words, expected):
    refused([*VLLM, *words], expected)


@pytest.mark.parametrize("flag", ["--pp-size", "--nnodes"])
def test_import_sglang_refuses_a_zero_size(flag):
    refused(["import", "--engine", "sglang", *BASE, "--", "python", "-m", "sglang.launch_server",
             "--model-path", "m", flag, "0"], f"{flag} 0: expected a positive integer")


def test_import_script_with_an_unclosed_quote(tmp_path):
    script = write(tmp_path, "q.sh", "export VLLM_X=1\nvllm serve 'm \\\n  -tp 2\n")
    refused(["import", "--engine", "vllm", *BASE, "-f", script], "q.sh: line 2 of the script: no closing quotation")
    res = cli("import", "--engine", "vllm", *BASE, "-f",
              str(write(tmp_path, "b.sh", "vllm serve m -tp 2 \\")))
    assert res.exit_code == 0 and "tp: 2" in res.output, res.output  # as bash: continues into nothing


# -- sizes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("section, key, value, expected", [
    ("speculative", "draft_num_layers", 10**12, "expected at most 1,024"),
    ("model", "num_kv_heads", 2**63, "expected at most 65,536"),
    ("model", "page_size", 2**64, "expected at most 1,048,576"),
    ("speculative", "num_draft_tokens", 2**40, "expected at most 4,097"),
    ("runtime", "timeout_s", 1e300, "expected at most 86,400"),
])
def test_every_count_has_a_limit(tmp_path, section, key, value, expected):
    text = SPEC.read_text().replace(f"{section}:\n", f"{section}:\n  {key}: {value}\n", 1)
    refused(["check", write(tmp_path, "s.yaml", text)], f"{section}.{key}: {expected}")


# -- plans and output folders -------------------------------------------------------------------

def test_a_plan_in_capitals_is_read_as_a_plan(tmp_path):
    res = cli("compile", str(SPEC), "-o", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    upper = tmp_path / "PLAN.JSON"
    upper.write_bytes((tmp_path / "out" / "plan.json").read_bytes())
    res = cli("check", str(upper))
    assert res.exit_code == 0 and "no findings" in res.output, res.output
    refused(["explain", upper], "this is a plan; explain takes the spec")


def test_compile_replaces_another_plans_runtime_module(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "runtime_other_plan.py").write_text("# another plan's module\n")
    (out / "notes.txt").write_text("mine\n")
    res = cli("compile", str(SPEC), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "plan.json",
                                                     "runtime_llama_3_2_1b_eagle3_pp2.py"]


def test_import_over_a_file_keeps_its_mode(tmp_path):
    out = tmp_path / "spec.yaml"
    out.write_text("old\n")
    out.chmod(0o640)
    res = cli(*VLLM[:5], "-o", str(out), *VLLM[5:])
    assert res.exit_code == 0, res.output
    assert out.stat().st_mode & 0o777 == 0o640 and "engine: vllm" in out.read_text()


SLOW_COMPILE = """
import sys, time
import specplan.lower.fx_module as fx
def slow(plan, out_dir):
    (out_dir / "runtime_half.py").write_text("# half")
    print("staged", flush=True)
    time.sleep(60)
fx.write_runtime_module = slow
from specplan.cli import main
sys.argv = ["specplan", "compile", sys.argv[1], "-o", sys.argv[2]]
main()
"""


def test_sigterm_during_compile_leaves_nothing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SLOW_COMPILE, str(SPEC), str(tmp_path / "out")],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "staged"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
    deadline = time.monotonic() + 5
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []  # no staging folder, no half output


def test_import_refuses_a_draft_path_that_is_json():
    refused([*VLLM, "--speculative-config.method", "eagle3", "--speculative-config.model", "[1]"],
            "--speculative-config model: expected a checkpoint path or hub name, found [1]")
