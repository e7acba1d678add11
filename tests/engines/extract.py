"""Call single functions of the engines' unpacked wheels without importing their packages.

Importing `sglang.srt.disaggregation.common.conn` or vLLM's kv_connector package pulls in
zmq, requests, torch, CUDA platforms and a model registry, none of which the rank mapping
touches. So the test compiles the engine's own source of just the named functions and classes
(parsed from the wheel's file with `ast`, never copied into this repository) in a namespace
holding the few names they use; a method is compiled as a plain function and called with a
plain object as `self`. What a namespace supplies is named by the caller.
"""

from __future__ import annotations

import __future__
import ast
from pathlib import Path


def compile_defs(path: Path, names: list[str], namespace: dict, cls: str | None = None) -> dict:
    """Compile the top-level defs `names` of `path` (or the methods `names` of class `cls`)
    into `namespace`, in file order, and return it."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    body = tree.body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    picked = [n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    missing = set(names) - {n.name for n in picked}
    assert not missing, f"{path} has no {sorted(missing)}"
    module = ast.Module(body=picked, type_ignores=[])
    flags = __future__.annotations.compiler_flag  # annotations stay strings, as in the wheel
    exec(compile(module, str(path), "exec", flags=flags, dont_inherit=True), namespace)
    return namespace


class QuietLogger:
    """Stands in for the engines' loggers (the mapping functions only log)."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
