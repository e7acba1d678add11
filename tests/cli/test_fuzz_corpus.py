"""A corpus of hostile inputs (tests/fuzz/): every one gets exit 2 (or 3) and a clear message,
never a traceback.

tests/fuzz/specs/ holds spec files that break a limit or the reader (nesting, huge sizes,
non-finite numbers, control characters in paths, several documents, a plan.json where a spec
belongs); tests/fuzz/traces/<case>/ holds rank<R>.jsonl traces `specplan diff` must refuse.
Each case names the message it must print. A 200,000-character name is generated here
rather than stored.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cli


ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"
SPEC_COMMANDS = (["explain"], ["explain", "--json"], ["compile", "-o", "{tmp}/out"], ["export"],
                 ["export", "--engine", "vllm"], ["simulate", "--rounds", "1"])

SPECS = {  # file -> what the message must say
    "deep-list.yaml": "nests deeper than 32 levels",
    "deep-map.yaml": "nests deeper than 32 levels",
    "tp-2-pow-40.yaml": "topology.tp: expected at most 1,048,576",
    "max-batch-10-pow-100.yaml": "runtime.max_batch: expected at most 65,536",
    "hidden-10-pow-100.yaml": "model.hidden_size: expected at most 1,048,576",
    "integer-5000-digits.yaml": "an integer of 5000 digits",
    "world-too-big.yaml": "beyond specplan's limit of 1,048,576 ranks",
    "num-steps-huge.yaml": "speculative.num_steps: expected at most 4,096 (specplan's limit",
    "topk-huge.yaml": "speculative.topk: expected at most 64",
    "layers-huge.yaml": "model.num_layers: expected at most 65,536",
    "vocab-huge.yaml": "model.vocab_size: expected at most 16,777,216",
    "moe-top-k-over-experts.yaml": "expected top_k <= num_experts",
    "timeout-inf.yaml": "runtime.timeout_s: expected a number > 0",
    "timeout-nan.yaml": "runtime.timeout_s: expected a number > 0",
    "timeout-minus-inf.yaml": "runtime.timeout_s: expected a number > 0",
    "nul-in-trace-dir.yaml": "runtime.trace_dir: the path holds a control character",
    "newline-in-model-path.yaml": "model.path: the path holds a control character",
    "multi-document.yaml": "one document expected",
    "name-with-markup.yaml": "name: expected a name matching",
    "bracketed-site.yaml": "unknown site '[/__w/pair.cc:553]'",
    "plan-instead-of-spec.json": "this is a plan; {command} takes the spec",
}

TRACES = {  # case folder -> what the message must say
    "malformed-json": "rank1.jsonl:1:13: malformed JSON",
    "non-object-line": "rank1.jsonl:1:1: expected a JSON object per line, found list",
    "binary": "rank1.jsonl: is a binary file",
    "not-utf8": "rank1.jsonl:2:1: is not UTF-8 text",
    "missing-hash": "rank1.jsonl:1:1: missing key(s) 'hash'",
    "missing-request": "rank1.jsonl:1:1: missing key(s) 'request'",
    "string-hash": "rank1.jsonl:1:1: hash: expected an integer, found \"5\"",
    "float-hash": "rank1.jsonl:1:1: hash: expected an integer, found 5.5",
    "bool-hash": "rank1.jsonl:1:1: hash: expected an integer, found true",
    "string-round": "rank1.jsonl:1:1: round: expected an integer",
    "rank-disagrees-with-file": "the record says rank 7 but the file is rank 1's",
    "two-plans": "traces of two plans",
    "empty-files": "the traces hold no record: nothing to compare",
    "one-rank-only": "only rank 0 has records: nothing to compare",
    "deeply-nested-json": "rank1.jsonl:1:1: malformed JSON",
}


def run(args: list[str]):
    res = cli(*args)
    crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
    assert not crashed, f"specplan {' '.join(args)[:200]} raised {res.exception!r}"
    return res


def refused(args: list[str], message: str, codes=(2,)) -> None:
    res = run(args)
    assert res.exit_code in codes, (args[:3], res.exit_code, res.output[-2000:])
    assert "Traceback" not in res.output
    assert message in res.output, (message, res.output[-2000:])


@pytest.mark.parametrize("name", sorted(SPECS), ids=lambda n: n.split(".")[0])
def test_hostile_spec_is_refused_by_every_command(name, tmp_path):
    spec = str(FUZZ / "specs" / name)
    for command in SPEC_COMMANDS:
        args = [command[0], spec] + [a.format(tmp=tmp_path) for a in command[1:]]
        refused(args, SPECS[name].format(command=command[0]))
    assert not (tmp_path / "out").exists()


def test_every_spec_in_the_corpus_has_a_case():
    assert sorted(p.name for p in (FUZZ / "specs").iterdir()) == sorted(SPECS)
    assert sorted(p.name for p in (FUZZ / "traces").iterdir()) == sorted([*TRACES, "bad-file-name"])


def test_a_200000_character_name(tmp_path):
    spec = tmp_path / "long.yaml"
    spec.write_text((FUZZ / "specs" / "timeout-inf.yaml").read_text()
                    .replace("name: fuzz", "name: " + "a" * 200_000).replace(".inf", "20"))
    refused(["compile", str(spec)], "name: expected at most 128 characters (specplan's limit), "
                                    "found string 'aaaa")
    refused(["explain", str(spec)], "(200,000 characters)")


@pytest.mark.parametrize("case", sorted(TRACES))
def test_hostile_trace_is_refused(case):
    refused(["diff", str(FUZZ / "traces" / case)], TRACES[case])


def test_diff_refuses_a_file_not_named_by_its_rank():
    folder = FUZZ / "traces" / "bad-file-name"
    refused(["diff", str(folder / "trace-of-rank2.jsonl"), str(folder / "rank0.jsonl")],
            "expected a trace named rank<R>.jsonl")
    assert run(["diff", str(folder)]).exit_code == 0  # a folder's other files are not traces


def test_diff_of_an_empty_folder(tmp_path):
    refused(["diff", str(tmp_path)], "holds no rank<R>.jsonl trace: nothing to compare")


def test_output_paths_that_cannot_be_written(tmp_path):
    spec = str(ROOT / "specs" / "llama-3.2-1b-eagle3-pp2.yaml")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    why = f"{blocker} is a file, not a folder"
    refused(["compile", spec, "-o", str(blocker / "out")], why)
    refused(["explain", spec, "--picture", "round", "-o", str(blocker / "r.svg")], why)
    refused(["import", "--engine", "vllm", "--base", spec, "-o", str(blocker / "s.yaml"), "--",
             "vllm", "serve", "m", "-tp", "2"], why)
    refused(["compile", spec, "-o", str(blocker)], "is a file")
    refused(["explain", spec, "--picture", "round", "-o", str(tmp_path)], "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing half-written


def test_import_of_a_missing_script(tmp_path):
    refused(["import", "--engine", "sglang", "-f", str(tmp_path / "nope.sh")],
            "nope.sh: no such file; expected a shell script holding a launch line")


def test_preflight_outside_torchrun(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    res = subprocess.run([sys.executable, "-m", "specplan.runtime.preflight", str(plan)],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "torchrun --nproc-per-node N -m specplan.runtime.preflight" in res.stderr
    assert "Traceback" not in res.stderr


def test_written_files_follow_the_umask(tmp_path):
    import os
    import stat

    spec = str(ROOT / "specs" / "llama-3.2-1b-eagle3-pp2.yaml")
    old = os.umask(0o022)
    try:
        assert run(["explain", spec, "--picture", "round", "-o", str(tmp_path / "r.svg")]).exit_code == 0
        assert run(["import", "--engine", "vllm", "--base", spec, "-o", str(tmp_path / "s.yaml"), "--",
                    "vllm", "serve", "m", "-tp", "2"]).exit_code == 0
        assert run(["compile", spec, "-o", str(tmp_path / "out")]).exit_code == 0
    finally:
        os.umask(old)
    for path in (tmp_path / "r.svg", tmp_path / "s.yaml", tmp_path / "out" / "plan.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o755
    assert not [p for p in tmp_path.rglob(".*")]  # no temporary or staging file left
