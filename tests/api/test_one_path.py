"""One path (issue 36 item 3): every command of the CLI, run through the CLI and through the
Python API, gives the same outcome: the exit code as the API's result or exception (0: a
value; 2: a UserError; 3: Refused, an export Refusal, or a value that found a problem), the
same files written (names and bytes), and the same value or messages."""

from __future__ import annotations

import ast
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

import specplan
from specplan.cli import main
from specplan.ecosystem.translate import Refusal
from specplan.errors import UserError
from specplan.verify import has_errors
from tests.helpers import ROOT, cli

SPEC = "specs/kimi-k3-dspark-tp8-pp2.yaml"
PD = "specs/disagg/kimi-k3-dspark-pd.yaml"
ERR = "tests/verify/specs/error-drafts-not-relayed.yaml"
ENGINE_SPEC = "specs/engine/llama-3.1-8b-eagle-tp8-sglang-engine.yaml"
LAUNCH_REFUSED = ("name: refused\nengine: sglang\ntopology: {tp: 1, pp: 2}\n"
                  "model: {num_layers: 8, hidden_size: 64, vocab_size: 512}\n"
                  "speculative: {method: eagle3, num_steps: 2}\n")  # SGLang: no EAGLE3 under PP
TINY = ("name: tiny\nengine: sglang\ntopology: {tp: 2}\n"
        "model: {num_layers: 4, hidden_size: 64, vocab_size: 128}\n"
        "speculative: {method: eagle, num_steps: 2}\n")  # a run of a few seconds
SGLANG_LINE = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "2",
               "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
               "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
               "--speculative-draft-model-path", "/d"]


@dataclass(frozen=True)
class Case:
    """`argv` (with {out} and {tmp} filled in) against `api(out, tmp)`; `code_of`: the exit code
    a returned value stands for; `same(value, run)`: the value against what the CLI printed."""

    argv: tuple[str, ...]
    api: Callable[[Path, Path], Any]
    same: Callable[[Any, Any], None] | None = None
    code_of: Callable[[Any], int] = field(default=lambda value: 0)


def _json(value: Any, run: Any) -> None:
    assert value == json.loads(run.stdout)


def _findings(value: Any, run: Any) -> None:
    report = json.loads(run.stdout)
    want = report["findings"] + [f for found in report.get("instances", {}).values() for f in found]
    assert [f.to_dict() for f in value] == want


def _text(value: Any, run: Any) -> None:
    assert value == run.stdout


def _said(nl: bool) -> Callable[[Any, Any], None]:
    def same(value: Any, run: Any) -> None:
        assert run.stdout == (value.text + "\n" if nl and value.text else value.text)
        assert run.stderr == "".join(m + "\n" for m in value.messages)
    return same


def _found(value: Any) -> int:
    return 3 if value.found else 0


def _checked(value: Any) -> int:
    return 3 if has_errors(value) else 0


def _reported(value: Any) -> int:
    return 0 if value.ok else 3


def _traces(tmp: Path) -> Path:
    """Two ranks that diverge at round 1 (one plan)."""
    for rank, value in ((0, 3), (1, 4)):
        rec = {"round": 1, "request": "q0", "site": "eagle_accept", "decision": "accept_index",
               "hash": value, "value": [value], "seq_len": None, "positions": None, "rank": rank,
               "replica": 0, "fingerprint": "a" * 64}
        (tmp / f"rank{rank}.jsonl").write_text(json.dumps(rec) + "\n")
    return tmp


def _config(tmp: Path) -> Path:
    (tmp / "config.json").write_text(json.dumps({"num_hidden_layers": 8, "hidden_size": 512,
                                                 "vocab_size": 32000}))
    return tmp / "config.json"


def _reports(value: Any, run: Any) -> None:
    data = json.loads(run.stdout)
    v = data["verdict"]
    assert (value.ok, list(value.problems), value.requests_checked, value.requests_agreed,
            value.world_size, value.rounds) == (v["ok"], v["problems"], v["checked"], v["agreed"],
                                                data["world_size"], data["rounds"])


def _launch_refused(tmp: Path) -> Path:
    (tmp / "refused.yaml").write_text(LAUNCH_REFUSED)
    (tmp / "tiny.yaml").write_text(TINY)
    return tmp / "refused.yaml"


L = specplan.load
CASES: dict[str, Case] = {
    "explain-json": Case(("explain", SPEC, "--json"), lambda o, t: L(SPEC).explain(), _json),
    "explain-rank": Case(("explain", SPEC, "--json", "--rank", "3"),
                         lambda o, t: L(SPEC).explain(rank=3), _json),
    "explain-rank-outside": Case(("explain", SPEC, "--rank", "99"), lambda o, t: L(SPEC).explain(rank=99)),
    "explain-deployment": Case(("explain", PD, "--json"), lambda o, t: L(PD).explain(), _json),
    "explain-deployment-rank": Case(("explain", PD, "--rank", "0"), lambda o, t: L(PD).explain(rank=0)),
    "explain-picture": Case(("explain", SPEC, "--picture", "ranks", "-o", "{out}/ranks.svg"),
                            lambda o, t: L(SPEC).picture("ranks", o / "ranks.svg")),
    "explain-missing": Case(("explain", "specs/no-such.yaml"), lambda o, t: L("specs/no-such.yaml").explain()),
    "check": Case(("check", SPEC, "--json"), lambda o, t: L(SPEC).check(), _findings, _checked),
    "check-error": Case(("check", ERR, "--json"), lambda o, t: L(ERR).check(), _findings, _checked),
    "check-deployment": Case(("check", PD, "--json"), lambda o, t: L(PD).check(), _findings, _checked),
    "check-baseline": Case(("check", SPEC, "--write-baseline", "{out}/base.json", "--json"),
                           lambda o, t: L(SPEC).check(write_baseline=o / "base.json"), _findings,
                           _checked),
    "compile": Case(("compile", SPEC, "-o", "{out}"), lambda o, t: L(SPEC).compile(o, runtime=True)),
    "compile-deployment": Case(("compile", PD, "-o", "{out}"),
                               lambda o, t: L(PD).compile(o, runtime=True)),
    "compile-error": Case(("compile", ERR, "-o", "{out}"), lambda o, t: L(ERR).compile(o, runtime=True)),
    "export": Case(("export", SPEC, "--engine", "vllm"), lambda o, t: L(SPEC).export("vllm"), _text),
    "export-deployment": Case(("export", PD), lambda o, t: L(PD).export(), _text),
    "export-deployment-engine": Case(("export", PD, "--engine", "vllm"),
                                     lambda o, t: L(PD).export("vllm")),
    "export-release": Case(("export", SPEC, "--engine-version", "0.0.1"),
                           lambda o, t: L(SPEC).export(version="0.0.1")),
    "simulate-bounds": Case(("simulate", SPEC, "--rounds", "0"), lambda o, t: L(SPEC).simulate(rounds=0)),
    "simulate-kv-rows": Case(("simulate", SPEC, "--rounds", "4096", "--requests", "1024"),
                             lambda o, t: L(SPEC).simulate(rounds=4096, requests=1024)),
    "simulate-check-error": Case(("simulate", ERR, "--json"), lambda o, t: L(ERR).simulate(),
                                 _findings),
    "simulate-launch-refused": Case(("simulate", "{tmp}/refused.yaml", "--allow-errors"),
                                    lambda o, t: L(t / "refused.yaml").simulate(allow_errors=True),
                                    code_of=_reported),
    "simulate-run": Case(("simulate", "{tmp}/tiny.yaml", "--rounds", "2", "--requests", "1", "--json",
                          "--trace-dir", "{out}/traces"),
                         lambda o, t: L(t / "tiny.yaml").simulate(rounds=2, requests=1,
                                                                  trace_dir=o / "traces"),
                         _reports, _reported),
    "simulate-layer-map": Case(("simulate", SPEC, "--inject", "layer-map"),
                               lambda o, t: L(SPEC).simulate(inject="layer-map")),
    "simulate-serving-fault": Case(("simulate", SPEC, "--inject", "stale-slot"),
                                   lambda o, t: L(SPEC).simulate(inject="stale-slot")),
    "simulate-deployment-fault": Case(("simulate", PD, "--inject", "noise"),
                                      lambda o, t: L(PD).simulate(inject="noise")),
    "schema": Case(("schema",), lambda o, t: specplan.spec_schema(), _text),
    "import": Case(("import", "--engine", "sglang", "--model-config", "{tmp}/config.json", "--",
                    *SGLANG_LINE),
                   lambda o, t: specplan.import_line("sglang", SGLANG_LINE,
                                                     model_config=str(t / "config.json")),
                   _said(nl=False), _found),
    "import-no-line": Case(("import", "--engine", "vllm"), lambda o, t: specplan.import_line("vllm")),
    "enforce": Case(("enforce", ENGINE_SPEC, "-o", "{out}"), lambda o, t: specplan.enforce(ENGINE_SPEC, o),
                    _said(nl=False), _found),
    "enforce-line": Case(("enforce", "--engine", "sglang", "--model-config", "{tmp}/config.json",
                          "-o", "{out}", "--", *SGLANG_LINE),
                         lambda o, t: specplan.enforce(None, o, engine="sglang", line=SGLANG_LINE,
                                                       model_config=str(t / "config.json")),
                         _said(nl=False), _found),
    "diff": Case(("diff", "{tmp}/rank0.jsonl", "{tmp}/rank1.jsonl"),
                 lambda o, t: specplan.diff(t / "rank0.jsonl", t / "rank1.jsonl"), _said(nl=True), _found),
    "diff-acceptance-one-run": Case(("diff", "--acceptance", "{tmp}"),
                                    lambda o, t: specplan.diff(t, acceptance=True)),
}


def test_every_command_has_a_case():
    assert {c.argv[0] for c in CASES.values()} == set(main.commands)


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _api(case: Case, out: Path, tmp: Path) -> tuple[int, Any]:
    try:
        value = case.api(out, tmp)
    except specplan.Refused as exc:
        return 3, exc
    except Refusal as exc:
        return 3, exc
    except UserError as exc:
        return 2, exc
    return case.code_of(value), value


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_api_and_the_cli_agree(name, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # plan.json records the spec path as given
    case, tmp, out = CASES[name], tmp_path / "in", tmp_path / "out"
    tmp.mkdir()
    _traces(tmp), _config(tmp), _launch_refused(tmp)
    run = cli(*(a.format(out=out, tmp=tmp) for a in case.argv), catch=False)
    cli_files = _files(out) if out.exists() else None
    shutil.rmtree(out, ignore_errors=True)
    code, value = _api(case, out, tmp)
    assert (code, _files(out) if out.exists() else None) == (run.returncode, cli_files), run.output[-2000:]
    if code == 2:  # every diagnostic the API raises, the CLI printed
        for diag in value.diagnostics:
            assert diag.message in run.stderr, (str(diag), run.stderr)
    elif isinstance(value, specplan.Refused):  # the ERRORs check finds, named as the CLI names them
        assert value.diagnostics and all(d.path in run.output for d in value.diagnostics)
        if case.same is not None:
            case.same(value.findings, run)
    elif isinstance(value, specplan.Report) and case.same is None:
        assert value.problems and all(p in run.output for p in value.problems), run.output
    elif case.same is not None:
        case.same(value, run)


def _calls(fn: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _imports(fn: ast.AST) -> dict[str, set[str]]:
    """module -> the names `fn` imports from it (specplan.commands.* only)."""
    out: dict[str, set[str]] = {}
    for n in ast.walk(fn):
        if isinstance(n, ast.ImportFrom) and n.module == "specplan.commands":  # the module itself
            for a in n.names:
                out.setdefault(f"specplan.commands.{a.name}", set())
        elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith("specplan.commands."):
            out.setdefault(n.module or "", set()).update(a.name for a in n.names)
    return out


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_the_cli_and_the_api_are_thin_shells_over_one_function_per_command():
    """Each CLI command calls one command module (cli.py: options only), and each API entry
    calls a function of that module which the module's own `run` (the CLI's body) goes through."""
    cli_fns = _functions(ROOT / "specplan/cli.py")
    verbs = {name: {m for m in _imports(cli_fns[fn.callback.__name__]) if m != "specplan.commands.target"}
             for name, fn in main.commands.items()}
    assert all(len(modules) <= 1 for modules in verbs.values()), verbs
    assert verbs["schema"] == set()  # schema_text, which the API's spec_schema returns too
    shared = {}
    for name, fn in _functions(ROOT / "specplan/api.py").items():
        for module, names in _imports(fn).items():
            if module.rsplit(".", 1)[1] in ("target", "load", "common", "deployment"):
                continue
            own = _functions(ROOT / (module.replace(".", "/") + ".py"))
            for value in names & set(own):  # its functions (LineOptions is a class)
                assert _calls(own["run"]) & ({value} | _calls(own[value])), (name, module, value)
                shared[module] = value
    assert set(shared) == set().union(*verbs.values()), shared
