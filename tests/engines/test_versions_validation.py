"""Every older supported release's own validation and group code agrees with specplan's rules
on the topology table: test_engine_validation.py rerun against that release's wheel
(SPECPLAN_<ENGINE>_RELEASE, wheels.py). Marker `versions` (run by hand: pytest -m versions);
the newest release runs in the `engines` step. Measured: SGLang 0.5.20-0.5.23 and vLLM
0.30.0-0.33.0 refuse exactly the same topologies of the table and build the same DCP groups
(the functions' sources differ, not their verdicts on the table); the SGLang rules that do
differ by release (PP + speculative decoding, CP counting plain DP replicas) are measured per
release in test_release_rules.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.engines.releases import RELEASES, newest

pytestmark = [pytest.mark.engines, pytest.mark.versions]
HERE = Path(__file__).resolve().parent
OLDER = [(e, v) for e, vs in RELEASES.items() for v in vs if v != newest(e)]


@pytest.mark.parametrize("engine,version", OLDER, ids=[f"{e}-{v}" for e, v in OLDER])
def test_an_older_release_agrees_with_the_rules(engine, version):
    env = {**os.environ, f"SPECPLAN_{engine.upper()}_RELEASE": version}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "engines", "-k", engine,
                           "-p", "no:cacheprovider", str(HERE / "test_engine_validation.py")],
                          capture_output=True, text=True, timeout=900, env=env, cwd=HERE.parents[1])
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
