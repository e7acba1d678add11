"""specplan's table of the engines' speculative defaults (specplan/engines/sglang/defaults.py)
is each SGLang release's own: _auto_choose_speculative_params run from the wheel for every
architecture the table names and one it does not, STANDALONE, and NGRAM's breadth and draft
tokens. The newest release runs under `engines`, the older ones under `versions`."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from real_code import source_of

from specplan.engines.sglang import defaults as d
from specplan.engines.releases import RELEASES, newest

pytestmark = pytest.mark.engines
HERE = Path(__file__).resolve().parent
RELEASE_PARAMS = [pytest.param(v, marks=() if v == newest("sglang") else pytest.mark.versions)
                  for v in RELEASES["sglang"]]


def _named(version: str) -> set[str]:
    """Every architecture the release's _auto_choose_speculative_params names (a string it
    compares model_arch with), so an architecture the wheel adds is probed too."""
    _, tree = source_of("sglang", "sglang/srt/arg_groups/speculative_hook.py", version)
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                and n.name == "_auto_choose_speculative_params")
    return {n.value for n in ast.walk(func) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and n.value.endswith(("ForCausalLM", "Generation"))}


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_sglang_defaults_are_the_wheels(version):
    mine = d.BY_RELEASE[version]  # the row import applies for a line read as this release
    archs = sorted({*mine.by_arch, *_named(version), "Qwen3ForCausalLM"})
    proc = subprocess.run([sys.executable, str(HERE / "spec_defaults_probe.py"), version, *archs],
                          capture_output=True, text=True, timeout=600, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    real = json.loads(proc.stdout.strip().splitlines()[-1])
    for arch in archs:
        assert tuple(real[arch]) == mine.by_arch.get(arch, mine.otherwise), arch
    assert tuple(real["STANDALONE"]) == mine.standalone
    assert real["NGRAM"] == [mine.ngram_bfs_breadth, mine.ngram_draft_tokens]
