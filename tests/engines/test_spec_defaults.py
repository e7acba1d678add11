"""specplan's table of the engines' speculative defaults (specplan/engines/sglang/defaults.py)
is each SGLang release's own: _auto_choose_speculative_params run from the wheel for every
architecture the table names and one it does not, STANDALONE, and NGRAM's breadth and draft
tokens. The newest release runs under `engines`, the older ones under `versions`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.engines.sglang import defaults as d
from specplan.engines.releases import RELEASES, newest

pytestmark = pytest.mark.engines
HERE = Path(__file__).resolve().parent
RELEASE_PARAMS = [pytest.param(v, marks=() if v == newest("sglang") else pytest.mark.versions)
                  for v in RELEASES["sglang"]]


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_sglang_defaults_are_the_wheels(version):
    archs = [*d.SGLANG_BY_ARCH, "Qwen3ForCausalLM"]
    proc = subprocess.run([sys.executable, str(HERE / "spec_defaults_probe.py"), version, *archs],
                          capture_output=True, text=True, timeout=600, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    for arch in archs:
        assert tuple(real[arch]) == d.SGLANG_BY_ARCH.get(arch, d.SGLANG_OTHERWISE), arch
    assert tuple(real["STANDALONE"]) == d.SGLANG_STANDALONE
    assert real["NGRAM"] == [d.SGLANG_NGRAM_BFS_BREADTH, d.SGLANG_NGRAM_DRAFT_TOKENS]
