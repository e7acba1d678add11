"""vLLM 0.32.0's function-level repeats of the engines tests are marked `versions` (run by
hand with the older releases: `pytest -m versions`): CI runs vLLM 0.32.0 for real in the
real-engine lane, and these repeats kept CI over its time."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if HERE in Path(item.fspath).parents and "0.32.0" in map(str, params.values()):
            item.add_marker(pytest.mark.versions)
