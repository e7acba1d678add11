"""examples/vllm-cpu/run.sh, the recipe of docs/engines.md ("Running inside vLLM"), run verbatim
as a user runs it: it builds the environment and the tiny models, checks and compiles tiny.yaml,
generates without and with the plan and exits 0 only when the tokens are equal. The run must
also show the plugin's bind line for each of the two ranks (plan, fingerprint, release, hooks)
and leave no process behind (lane.run_group: its own session, killed at the bound).
"""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine


def test_the_docs_recipe_runs_as_written(python, tmp_path):
    work = tmp_path / "work"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECPLAN_", "VLLM_"))}
    # this checkout's specplan, whichever checkout the shared environment was installed from last
    env["PYTHONPATH"] = str(lane.ROOT)
    rc, lines, wall = lane.run_group(["bash", str(lane.EXAMPLE / "run.sh"), str(work)], env,
                                     timeout=2 * lane.RUN_TIMEOUT_S)
    out = [line for _, line in lines]
    assert rc == 0, f"run.sh exited {rc} after {wall:.0f} s:\n" + "\n".join(out[-60:])
    tokens = json.loads((work / "with-plan.json").read_text())
    assert f"same tokens with and without the plan: {json.dumps(tokens)}" in out
    assert len(tokens) == 2 and all(len(t) == 8 for t in tokens)
    fingerprint = json.loads((work / "plan" / "plan.json").read_text())["fingerprint"][:16]
    bound = [line for line in out if "[specplan] rank " in line and " bound plan " in line]
    ranks = sorted(int(re.search(r"\[specplan\] rank (\d+) ", line).group(1)) for line in bound)
    assert ranks == [0, 1], "\n".join(bound or out[-60:])
    for line in bound:
        assert f"bound plan 'tiny-tp2-draft' (fingerprint {fingerprint}) on vllm 0.32.0" in line
        assert "hooks: " in line and "parallel_state.initialize_model_parallel" in line
