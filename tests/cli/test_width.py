"""Every command fits the terminal it is given (issue 38 item 5; specplan/commands/fit.py).

Each width runs every command once, in one Python process whose stdout and stderr are a real
pseudo-terminal (python's pty module) of that width, COLUMNS unset: the width comes from the
terminal itself. Every line must fit (but one carrying a word that cannot fit beside its indent
and markers, such as a long path: it has a line of its own and is kept whole), and no identifier may be cut (no '…', and every group
family and site name `explain --json` and `check --json` give appears whole in the text).
Machine formats (--json, SARIF, JUnit, `specplan schema`) are JSON/XML and are not wrapped.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import pytest

from tests.helpers import ROOT, cli

DEEPSEEK = "specs/deepseek-v4-dspark-tp16-dp8.yaml"
KIMI = "specs/engine/kimi-k3-dspark-tp8-pp2-vllm-engine.yaml"
PRE_50514 = "specs/engine/llama-3.2-1b-eagle3-pp2-vllm-pre-50514.yaml"
SGLANG_ENGINE = "specs/engine/llama-3.1-8b-eagle-tp8-sglang-engine.yaml"
PD = "specs/disagg/kimi-k3-dspark-pd.yaml"
PREFILL, DECODE = "specs/disagg/llama-eagle-prefill-tp2-pp2.yaml", "specs/disagg/llama-eagle-decode-tp4-dpattn2.yaml"
LONG_LINE = ["vllm", "serve", "meta-llama/Llama-3.2-1B", "-tp", "1", "-pp", "2", "--speculative-config",
             '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", '
             '"num_speculative_tokens": 3}']
COMMANDS = [
    ["--help"], ["--version"],
    *([name, "--help"] for name in ("explain", "check", "compile", "diff", "schema", "export",
                                    "import", "enforce", "simulate")),
    ["explain", DEEPSEEK], ["explain", DEEPSEEK, "--rank", "3"], ["explain", KIMI, "--all-families"],
    ["explain", PD],
    ["check", KIMI], ["check", KIMI, "-v"], ["check", PRE_50514, "-v"], ["check", PD],
    ["check", PREFILL, DECODE],
    ["compile", KIMI, "-o", "{tmp}/compiled"],
    ["export", DEEPSEEK, "--engine", "vllm"], ["export", SGLANG_ENGINE], ["export", PD],
    ["export", "specs/kimi-k3-dspark-tp8-pp2.yaml", "--nodes"],
    ["import", "--engine", "vllm", "--base", "specs/llama-3.2-1b-eagle3-pp2.yaml", "--", *LONG_LINE],
    ["enforce", SGLANG_ENGINE, "-o", "{tmp}/enforced"],
    ["diff", "{tmp}/trace"],
]
MARK = "=== specplan"
# Runs each argv in this one process (click's main, not a new interpreter per command).
DRIVER = """
import json, sys
from specplan.cli import main
for argv in json.loads(sys.argv[1]):
    print("=== specplan " + " ".join(argv), flush=True)
    try:
        main(argv, prog_name="specplan")
    except SystemExit:
        pass
    sys.stdout.flush(); sys.stderr.flush()
"""
_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _on_a_terminal(width: int, commands: list[list[str]]) -> str:
    """What a `width`-column terminal shows while DRIVER runs `commands`."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(commands)], cwd=ROOT, env=env,
                            stdin=follower, stdout=follower, stderr=follower)
    os.close(follower)
    chunks = []
    try:
        while True:
            try:
                data = os.read(leader, 1 << 16)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        proc.wait(timeout=300)
    return _ESCAPE.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")


def _by_command(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for block in text.split(MARK + " ")[1:]:
        head, _, body = block.partition("\n")
        out[head] = body.splitlines()
    return out


def _traces(folder) -> None:
    """Two ranks of one replica whose drafts differ at round 2 (long values: the report wraps)."""
    folder.mkdir()
    for rank in (0, 1):
        records = [{"round": rnd, "request": "req-0", "site": "eagle3_draft", "decision": "draft_tokens",
                    "hash": rnd if rnd < 2 else rnd + rank, "value": list(range(rank, rank + 40)),
                    "seq_len": 12 + rnd, "positions": None, "rank": rank, "replica": 0}
                   for rnd in (1, 2)]
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _names(tmp_path) -> set[str]:
    """Identifiers the text must show whole: the group families and the check findings' sites."""
    data = json.loads(cli("explain", DEEPSEEK, "--json", code=0).stdout)
    families = set(data["groups"])
    sites = {f["site"] for f in json.loads(cli("check", PRE_50514, "--json", code=3).stdout)["findings"]}
    return {n for n in families | sites if n}


@pytest.mark.parametrize("width", [80, 100])
def test_every_command_fits_the_terminal(width, tmp_path):
    _traces(tmp_path / "trace")
    commands = [[a.replace("{tmp}", str(tmp_path)) for a in argv] for argv in COMMANDS]
    shown = _by_command(_on_a_terminal(width, commands))
    assert len(shown) == len(commands), sorted(shown)
    _fits(shown, width)
    text = "\n".join(line for lines in shown.values() for line in lines)
    words = set(re.findall(r"[\w./-]+", text))
    missing = {n for n in _names(tmp_path) if n not in words}
    assert not missing, f"cut or missing at {width} columns: {missing}"


def _fits(shown: dict[str, list[str]], width: int) -> None:
    for head, lines in shown.items():
        assert lines, f"`specplan {head}` printed nothing"
        # a word that cannot fit beside its indent and markers (`#`, ` \\`), such as a long path,
        # is kept whole on a line of its own
        wide = [line for line in lines if len(line.rstrip()) > width
                and max(map(len, line.split())) <= width - 8]
        assert not wide, f"`specplan {head}` at {width} columns:\n" + "\n".join(wide)
        assert not any("…" in line for line in lines), f"`specplan {head}` cut a name"


# A small fast spec (2 gloo ranks, 2 rounds): its report, a failing run's, check's refusal of a
# spec before any rank starts, and a usage error, each on the real terminal.
SIM_SPEC = """\
name: width-sim-tp2-eagle-tree-with-a-long-name
engine: sglang
topology: {{tp: 2}}
model: {{num_layers: 4, hidden_size: 64, vocab_size: 512}}
speculative: {{method: eagle, num_steps: 3, topk: 2, num_draft_tokens: 6}}
sync: {{policy: {policy}}}
"""


@pytest.mark.parametrize("width", [80, 100])
def test_simulate_runs_fit_the_terminal(width, tmp_path):
    for policy in ("safe", "off"):
        (tmp_path / f"{policy}.yaml").write_text(SIM_SPEC.format(policy=policy))
    small = ["--rounds", "2", "--requests", "2"]
    runs = {"pass": ["simulate", str(tmp_path / "safe.yaml"), *small],
            "fail": ["simulate", str(tmp_path / "off.yaml"), *small, "--inject", "noise"],
            "refused": ["simulate", PRE_50514, *small],
            "usage": ["simulate", str(tmp_path / "safe.yaml"), *small, "--inject", "gate"]}
    shown = _by_command(_on_a_terminal(width, list(runs.values())))
    assert len(shown) == len(runs), sorted(shown)
    _fits(shown, width)
    said = {name: "\n".join(shown[" ".join(argv)]) for name, argv in runs.items()}
    words = {name: set(re.findall(r"[\w./<>-]+", text)) for name, text in said.items()}
    assert "PASS: every replica's ranks agreed" in said["pass"]
    assert "width-sim-tp2-eagle-tree-with-a-long-name" in words["pass"]
    assert "FAIL:" in said["fail"] and "next_token_ids" in words["fail"]
    assert "not simulated: `specplan check` predicts the failures above" in said["refused"]
    assert "--allow-errors" in words["refused"]
    assert "Error: --inject gate diverges the plan's gates" in said["usage"]
    assert "engines/<engine>/gates.py" in words["usage"]
