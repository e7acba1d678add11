"""The README's runtime example runs as written: compile, then torchrun on gloo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT
from tests.ranks import free_port
from tests.helpers import cli


def test_gloo_engine_example_commits_the_same_tokens_on_every_rank(tmp_path):
    out = cli("compile", str(ROOT / "examples/tp2-dspark-cpu.yaml"), "-o", str(tmp_path))
    assert out.exit_code == 0, out.output
    torchrun = Path(sys.executable).with_name("torchrun")
    run = subprocess.run([str(torchrun), "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                          "--master-port", str(free_port()), str(ROOT / "examples/gloo_engine.py"),
                          str(tmp_path / "plan.json")], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="1"), cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = sorted(re.findall(r"^rank (\d): (.*)$", run.stdout, re.M))
    assert [r for r, _ in lines] == ["0", "1"]
    assert lines[0][1] == lines[1][1]
    assert "seq_lens [19, 19, 19, 19]" in lines[0][1]
