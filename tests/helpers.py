"""What test files across tests/ share: the repository root, the one way to run `specplan`, a
spec compiled to a plan, and a few specs and hypothesis draws used in more than one directory
(tests/ranks.py has the multi-rank tests' launcher and worker protocol).

    from tests.helpers import ROOT, cli

    run = cli("check", spec, "--json")                 # in this process (click's CliRunner)
    run = cli("explain", spec, process=True)           # `python -m specplan.cli`, cwd ROOT
    run = cli("check", spec, code=(0, 3))              # and assert: no crash, one of these codes

Either way the answer is a `Run`: `returncode` (also `exit_code`), `stdout`, `stderr`, `output`
(what a terminal shows) and, in process, the `exception` the command raised (a SystemExit for
an ordinary exit). A subprocess is for what only a fresh interpreter shows (its real exit
status, the traceback it prints, imports); everything else runs in process, in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
UNWRAPPED = "100000"  # the COLUMNS `cli` runs commands at unless told: wider than any line

# tp 2 x pp 2 on vLLM, DSpark drafts relayed by column: the planner's contracts and the relays'
# wire layout are tested on it.
COLUMN_SPEC = """
name: tp2-pp2-column
engine: vllm
topology: {tp: 2, pp: 2}
model: {num_layers: 8, hidden_size: 256, vocab_size: 1024}
speculative: {method: dspark, num_steps: 5, sampling: greedy}
pipeline: {relay: column}
runtime: {max_batch: 8}
"""


@dataclass(frozen=True)
class Run:
    """One run of a command: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str
    output: str
    exception: BaseException | None = None
    exit_code = property(attrgetter("returncode"), doc="click's name for returncode")


def cli(*args, process: bool = False, program: str = "specplan.cli", cwd: Path | str | None = None,
        env: dict | None = None, catch: bool = True, code: int | tuple[int, ...] | None = None,
        timeout: float = 600) -> Run:
    """`specplan *args` (each argument str()-ed), in this process or (`process`) as
    `python -m <program>` in cwd (the repository root unless given; in process, `cwd` is entered
    for the call when given). `env` overlays os.environ (a None value unsets), as CliRunner does.
    `catch` False lets an in-process exception through. `code`: assert the command did not crash
    and exited with it (or one of them)."""
    argv = [str(a) for a in args]
    # Every command fits the width it is given (specplan/commands/fit.py; 100 columns piped).
    # Tests read output unwrapped (goldens and the API's text compare as written) unless they
    # give COLUMNS (tests/cli/test_width.py runs every command at 80 and 100 columns on a pty).
    env = {"COLUMNS": UNWRAPPED, **(env or {})}
    run = _process(program, argv, cwd, env, timeout) if process else _in_process(argv, cwd, env, catch)
    if code is not None:
        assert run.exception is None or isinstance(run.exception, SystemExit), repr(run.exception)
        assert run.returncode in ((code,) if isinstance(code, int) else code), run.output[-3000:]
    return run


def _process(program: str, argv: list[str], cwd, env: dict | None, timeout: float) -> Run:
    environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    done = subprocess.run([sys.executable, "-m", program, *argv], cwd=cwd or ROOT, env=environ,
                          capture_output=True, text=True, timeout=timeout)
    return Run(done.returncode, done.stdout, done.stderr, done.stdout + done.stderr)


def _in_process(argv: list[str], cwd, env: dict | None, catch: bool) -> Run:
    from click.testing import CliRunner

    from specplan.cli import main

    with contextlib.chdir(cwd) if cwd else contextlib.nullcontext():
        res = CliRunner().invoke(main, argv, env=env, catch_exceptions=catch)
    return Run(res.exit_code, res.stdout, res.stderr, res.output, res.exception)


def model_config(tmp: Path, config: dict) -> Path:
    """A model's config.json in `tmp`, as `--model-config` reads it."""
    path = tmp / "config.json"
    path.write_text(json.dumps(config))
    return path


def hf_cache(home: Path, configs: Path) -> str:
    """A Hugging Face cache in `home` holding each model's config.json from `configs` (a JSON
    object: model path -> its config), as import finds a line's model; HF_HOME's value."""
    for model, config in json.loads(configs.read_text()).items():
        snap = home / "hub" / ("models--" + model.strip("/").replace("/", "--")) / "snapshots" / "a"
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(json.dumps(config))
    return str(home)


def corpus_hf_home(folder: Path) -> Any:
    """A corpus folder's module-scoped `hf_home` fixture: a Hugging Face cache of the model
    configs in folder/configs.json (hf_cache), for the tests/ecosystem corpus tests."""
    import pytest

    @pytest.fixture(scope="module")
    def hf_home(tmp_path_factory: Any) -> str:
        return hf_cache(tmp_path_factory.mktemp("hf"), folder / "configs.json")

    return hf_home


def compile_spec(tmp: Path, text: str) -> Path:
    """Compile a spec written as YAML text into tmp/<name>/plan.json; returns the plan path."""
    from specplan.lower import write_plan
    from specplan import compile
    from specplan.schema import load_spec

    tmp.mkdir(parents=True, exist_ok=True)
    src = tmp / "spec.yaml"
    src.write_text(text)
    spec = load_spec(str(src))
    return write_plan(compile(spec), tmp / spec.name)


def draw_dp_attention_and_ep(draw, engine: str, topo: dict, moe: bool) -> None:
    """For a hypothesis strategy drawing a topology (`topo`: tp, pp, dp, cp drawn): the engine's
    DP-attention (SGLang) and an EP size it accepts (SGLang 1 or 2; vLLM 1 or dp * cp * tp)."""
    from hypothesis import strategies as st

    if engine == "sglang":
        topo["dp_attention"] = topo["dp"] > 1 and draw(st.booleans())
        topo["ep"] = draw(st.sampled_from([1, 2])) if moe else 1
    else:
        topo["ep"] = draw(st.sampled_from([1, topo["dp"] * topo["cp"] * topo["tp"]])) if moe else 1
