"""Two kinds of engines tests stay out of CI, where they kept it over its time, and are run by
hand: vLLM 0.30.0's, 0.31.0's and 0.32.0's function-level repeats, marked `versions` (with the older releases:
`pytest -m versions`; CI runs vLLM 0.32.0 for real in the real-engine lane), and the SGLang
plugin's 8-rank repeats of its 2- and 4-rank cases, marked `wide` (`pytest -m wide`)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The vLLM plugin's releases before the newest (its function-level tests run on each wheel).
OLDER_PLUGIN_RELEASES = {"0.30.0", "0.31.0", "0.32.0"}
WIDE_FILES = ("test_sglang_sites.py", "test_sglang_plugin.py")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if HERE in Path(item.fspath).parents and OLDER_PLUGIN_RELEASES & set(map(str, params.values())):
            item.add_marker(pytest.mark.versions)
        if item.fspath.basename in WIDE_FILES and "tp8" in item.nodeid:
            item.add_marker(pytest.mark.wide)
