"""OLDER_MTP (engines/vllm/methods.py) against the older vLLM releases' own SpeculativeConfig:
for every release tools/retired_flags.py reads, the model_types whose test guards the branch
that takes the target itself as the draft (`... = target_model_config.model`), and the function
holding it. Reads the wheels in tools/retired_flags.py's cache (downloaded there if missing)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from specplan.engines.vllm.methods import OLDER_MTP

pytestmark = pytest.mark.versions
ROOT = Path(__file__).resolve().parents[2]


def _source(version: str) -> str:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from retired_flags import unpacked
    finally:
        sys.path.remove(str(ROOT / "tools"))
    root = unpacked("vllm", version) / "vllm"
    for path in (root / "config.py", root / "config" / "__init__.py", root / "config" / "speculative.py"):
        if path.is_file() and "class SpeculativeConfig" in path.read_text():
            return path.read_text()
    raise AssertionError(f"no SpeculativeConfig in vLLM {version}")


def _detected(source: str) -> tuple[str | None, frozenset[str]]:
    """(the function, the model_types) of the branch taking the target as its own draft."""
    tree = ast.parse(source)
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig")
    for func in (n for n in ast.walk(cls) if isinstance(n, ast.FunctionDef)):
        for node in (n for n in ast.walk(func) if isinstance(n, ast.If)):
            takes = any(isinstance(s, ast.Assign) and ast.unparse(s.value).endswith("target_model_config.model")
                        for s in node.body)
            if takes and "model_type" in ast.unparse(node.test):
                kinds = {c.value for c in ast.walk(node.test) if isinstance(c, ast.Constant)
                         and isinstance(c.value, str)}
                return f"SpeculativeConfig.{func.name}", frozenset(kinds)
    return None, frozenset()


@pytest.mark.parametrize("version", ("0.6.6", "0.7.3", "0.8.5", "0.9.2", "0.10.2", "0.11.0",
                                     "0.12.0", "0.13.0", "0.14.0", "0.15.0", "0.25.0", "0.29.0"))
def test_older_mtp_is_what_each_release_detected(version):
    where, kinds = _detected(_source(version))
    assert (where, kinds) == (OLDER_MTP.get(version) or (None, frozenset()))
