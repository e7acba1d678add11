"""`specplan simulate` output: the report as one JSON object (--json), and progress per round
on stderr: one line per finished round when piped, a live line on a terminal."""

from __future__ import annotations

import io
import json
import os
import pty
from pathlib import Path

from specplan.sim.matrix import spec_text
from specplan.sim.progress import RoundProgress
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"name", "world_size", "replicas", "method", "sampling", "behaviour", "policy", "unconverged",
        "rounds", "requests",
        "seed", "inject", "shrunk", "summary", "verdict", "acceptance", "trace_dir", "exit_code"}


def test_json_report_and_one_progress_line_per_round_when_piped(tmp_path):
    spec = tmp_path / "tp2.yaml"
    spec.write_text(spec_text("tp2", "eagle-chain"))
    done = cli("simulate", spec, "--rounds", "3", "--json", process=True)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)  # stdout is the object alone: progress went to stderr
    assert set(report) == KEYS
    assert (report["world_size"], report["rounds"], report["method"]) == (2, 3, "eagle")
    assert report["verdict"] == {"ok": True, "agreed": 4, "checked": 4, "problems": []}
    assert report["exit_code"] == 0
    assert report["summary"]["accept_len"] >= 1.0 and report["summary"]["collectives"] > 0
    assert set(report["summary"]["phases"]) >= {"draft", "target", "converge"}
    lines = [line for line in done.stderr.splitlines() if line.startswith("simulate: round")]
    assert lines == [f"simulate: round {r}/3 done" for r in (1, 2, 3)]


def test_piped_progress_prints_each_round_once_in_order():
    out = io.StringIO()
    with RoundProgress(5, stream=out, live=False) as progress:
        for seen in (0, 2, 2, 3, 7):  # polls see rounds late, twice, and past the end
            progress.update(seen)
    assert out.getvalue().splitlines() == [f"simulate: round {r}/5 done" for r in range(1, 6)]


def test_a_terminal_gets_a_live_line():
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as tty:
        with RoundProgress(4, stream=tty) as progress:  # a real terminal: isatty() is True
            assert progress.live
            for r in range(1, 5):
                progress.update(r)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    text = seen.decode(errors="replace")
    assert "simulate" in text and "4/4" in text
    assert "simulate: round 1/4 done" not in text  # the live line, not the piped lines
