"""The engines' released wheels, unpacked once into a cache outside the repository.

Tests marked `engines` import SGLang 0.5.23 and vLLM 0.32.0 / 0.33.0's real Python modules from
these unpacked wheels (never vendored). `engine_root("sglang")` returns the directory holding the
`sglang` package, downloading it with `pip download --no-deps` on first use; when that is
impossible (no registry, no pip) the calling test is skipped with the reason.
`engine_root("vllm", "0.32.0")` picks one of an engine's tested releases (RELEASES; VERSIONS
holds each engine's newest, the default); tests parametrize over `RELEASES[engine]`.

The cache is `$SPECPLAN_ENGINE_CACHE`, else `~/.cache/specplan-engines`; each engine unpacks to
`<cache>/<name>-<version>/`. Shared objects are not unpacked: the tests stub what needs a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

RELEASES = {"sglang": ("0.5.23",), "vllm": ("0.32.0", "0.33.0")}
VERSIONS = {name: versions[-1] for name, versions in RELEASES.items()}
_BINARY = (".so", ".cubin", ".fatbin")


def cache_dir() -> Path:
    return Path(os.environ.get("SPECPLAN_ENGINE_CACHE") or Path.home() / ".cache" / "specplan-engines")


def engine_root(name: str, version: str | None = None) -> Path:
    """The directory to put on sys.path to import the real `name` package (`version`: one of
    RELEASES[name], default the newest)."""
    version = version or VERSIONS[name]
    assert version in RELEASES[name], (name, version)
    root = cache_dir() / f"{name}-{version}"
    if (root / name / "__init__.py").exists():
        return root
    wheel = _download(name, version)
    tmp = root.with_name(root.name + ".partial")
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if not m.endswith(_BINARY) and ".so." not in m]
        zf.extractall(tmp, members)
    tmp.rename(root)  # whole or not at all: a killed unpack never looks complete
    return root


def _download(name: str, version: str) -> Path:
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"{name}-{version}-*.whl"))
    if found:
        return found[0]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(cache), f"{name}=={version}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot download the {name} {version} wheel: {e}")
    found = sorted(cache.glob(f"{name}-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        pytest.skip(f"cannot download the {name} {version} wheel: {proc.stderr.strip()[-300:]}")
    return found[0]
