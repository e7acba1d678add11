"""The engines' released wheels, unpacked once into a cache outside the repository.

Tests marked `engines` import the newest supported release of each engine (SGLang, vLLM: the
releases are specplan/engines/releases.py's) from these unpacked wheels (never vendored);
tests marked `versions` import every supported release. `engine_root("sglang")` returns the
directory holding the newest `sglang` package, `engine_root("sglang", "0.5.21")` that
release's, downloading it with `pip download --no-deps` on first use; when that is
impossible (no registry, no pip) the calling test is skipped with the reason.

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

from specplan.engines.vllm import hooks as vllm_hooks
from specplan.engines.releases import RELEASES as SUPPORTED, newest

# What the `engines` tests import: the newest release, or the one SPECPLAN_<ENGINE>_RELEASE
# names (SPECPLAN_SGLANG_RELEASE=0.5.21 pytest -m engines ...: the same checks on that wheel).
VERSIONS = {name: os.environ.get(f"SPECPLAN_{name.upper()}_RELEASE") or newest(name)
            for name in SUPPORTED}
# The releases the plugin's hook tables cover (specplan/engines/vllm/hooks.py): the vLLM plugin's
# engines tests run on each of their wheels.
PLUGIN_RELEASES = {"vllm": tuple(v for v in SUPPORTED["vllm"] if vllm_hooks.release_for(v))}
_BINARY = (".so", ".cubin", ".fatbin")


def cache_dir() -> Path:
    return Path(os.environ.get("SPECPLAN_ENGINE_CACHE") or Path.home() / ".cache" / "specplan-engines")


def engine_root(name: str, version: str | None = None) -> Path:
    """The directory to put on sys.path to import the real `name` package (`version`, a
    supported release, else the newest)."""
    version = version or VERSIONS[name]
    if version not in SUPPORTED[name]:
        raise ValueError(f"{name} {version} is not a supported release: {SUPPORTED[name]}")
    root = cache_dir() / f"{name}-{version}"
    if (root / name / "__init__.py").exists():
        return root
    wheel = _download(name, version)
    tmp = root.with_name(f"{root.name}.partial-{os.getpid()}")
    with zipfile.ZipFile(wheel) as zf:
        members = [m for m in zf.namelist() if not m.endswith(_BINARY) and ".so." not in m]
        zf.extractall(tmp, members)
    try:
        tmp.rename(root)  # whole or not at all: a killed unpack never looks complete
    except OSError:  # another process unpacked it first
        if not (root / name / "__init__.py").exists():
            raise
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
