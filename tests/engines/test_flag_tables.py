"""The stored flag tables equal what the engines' real parsers accept, each release built from
its own wheel: a flag added, removed or changed in arity fails here. The newest release of each
engine runs under the `engines` marker, every older one under `versions` (run by hand:
`pytest -m versions`, docs/engines.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flag_tables import dumps, table_in_subprocess
from specplan.engines.flag_table import stored_data, stored_path
from specplan.engines.releases import RELEASES, newest

pytestmark = pytest.mark.engines

OLDER = [pytest.param(e, v, marks=pytest.mark.versions, id=f"{e}-{v}")
         for e, vs in RELEASES.items() for v in vs if v != newest(e)]


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_stored_table_is_the_parsers(engine):
    stored = json.loads(stored_path(engine, newest(engine)).read_text())
    real = table_in_subprocess(engine)
    assert dumps(stored) == dumps(real), (
        f"specplan/engines/{engine}/flags/{engine}.json differs from the {engine} parser; rerun "
        "`python tools/engine_flags.py` and review the diff")
    names = {n for f in real["flags"] for n in f["names"]}
    assert {"--speculative-algorithm", "--tp-size", "--enable-dp-attention"} <= names or {
        "-tp", "--speculative-config", "--async-scheduling", "--no-async-scheduling"} <= names


@pytest.mark.parametrize("engine,version", OLDER)
def test_an_older_release_table_is_its_parsers(engine, version):
    """The newest table with a release's stored differences applied is that release's parser
    (compared flag by flag: the differences keep the newest table's order)."""
    real = table_in_subprocess(engine, version)
    stored = stored_data(engine, version)
    by_name = lambda d: {f["names"][0]: f for f in d["flags"]}  # noqa: E731
    assert {k: v for k, v in stored.items() if k != "flags"} == {
        k: v for k, v in real.items() if k != "flags"}
    assert by_name(stored) == by_name(real), (
        f"{stored_path(engine, version).name} differs from the {engine} {version} parser; rerun "
        f"`python tools/engine_flags.py {engine} {version}` and review the diff")
    assert by_name(stored) != by_name(stored_data(engine)), "a release identical to the newest"


@pytest.mark.parametrize("engine,parse,expected", [
    ("sglang", ["--model-path", "m", "--tp", "16", "--dp", "8", "--enable-dp-attention",
                "--mem-fraction", "0.8"],
     {"tp_size": "16", "dp_size": "8", "enable_dp_attention": True, "mem_fraction_static": "0.8"}),
    ("vllm", ["m", "--tensor_parallel_size", "4", "-O3", "--speculative-config.method", "mtp",
              "--speculative-config.num_speculative_tokens", "1", "--no-async-scheduling"],
     {"tensor_parallel_size": "4", "optimization_level": "3", "async_scheduling": False,
      "speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}),
])
def test_the_real_parser_reads_what_import_reads(engine, parse, expected):
    """The spellings import accepts are the engine's: the real parser stores the same values
    (import keeps values as written, the parser converts them with its types)."""
    from specplan.ecosystem.argv import read_words
    from specplan.engines import convention

    _, ours = read_words(convention(engine).flag_table(), parse)
    assert {k: ours[k] for k in expected} == expected
    import subprocess
    import sys

    code = ("import sys, json; sys.path.insert(0, '.'); import flag_tables as f; "
            f"p = f.{engine}_parser(); ns = p.parse_args({parse!r}); "
            "print(json.dumps({k: v if isinstance(v, (int, float, str, bool, dict)) else "
            "getattr(v, '__dict__', str(v)) for k, v in vars(ns).items()}, default=str))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).parent, timeout=900,
                          env={**__import__('os').environ, "VLLM_TARGET_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    for dest, value in expected.items():
        if isinstance(value, dict):  # a config object: the keys import read are set alike
            assert {k: real[dest][k] for k in value} == value
        else:
            assert str(real[dest]) == str(value)


LINES = Path(__file__).resolve().parents[1] / "ecosystem" / "lines"


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_real_parser_accepts_the_corpus_as_import_reads_it(engine):
    """Every line of tests/ecosystem/lines/ parses with the engine's own parser, which stores
    the values import reads for every flag specplan plans."""
    import os
    import shlex
    import subprocess
    import sys

    from specplan.ecosystem.argv import read_words
    from specplan.ecosystem.launch_import import split_command
    from specplan.engines import convention

    table = convention(engine).flag_table()
    lines = {p.stem: split_command(engine, shlex.split(p.read_text()))[2]
             for p in sorted(LINES.glob(f"*.{engine}.sh"))}
    code = ("import sys, json; sys.path.insert(0, '.'); import flag_tables as f; "
            f"p = f.{engine}_parser(); lines = json.loads(sys.stdin.read()); out = {{}}\n"
            "for name, words in lines.items():\n"
            "    ns = vars(p.parse_args(words))\n"
            "    out[name] = {k: v for k, v in ns.items() if isinstance(v, (int, float, str, bool, dict))}\n"
            "print(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(lines), text=True,
                          capture_output=True, cwd=Path(__file__).parent, timeout=900,
                          env={**os.environ, "VLLM_TARGET_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(real) == len(lines) >= 12
    compared = 0
    for name, words in lines.items():
        _, ours = read_words(table, words)
        for dest, value in ours.items():
            if dest in convention(engine).launch.modelled and dest in real[name] and dest != "model":
                assert str(real[name][dest]) == str(value) or real[name][dest] == value, (name, dest)
                compared += 1
    assert compared >= 3 * len(lines)  # model, sizes, speculative flags: compared, not skipped
