"""Run one function (or some statements of one) from an engine's unpacked wheel, as written.

Importing SGLang's arg-group hooks or vLLM's config pulls in CUDA kernels, transformers,
zmq and more that the validation logic never touches. So the tests compile the function's
own source, read from the wheel with `ast` (never copied into this repository), and run it
with the few module-level names it reads bound to stubs the test passes in. A change in the
engine's function changes what runs here.
"""

from __future__ import annotations

import ast
import sys
import textwrap
import types
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from wheels import engine_root


def source_of(engine: str, relpath: str, version: str | None = None) -> tuple[Path, ast.Module]:
    path = engine_root(engine, version) / relpath
    return path, ast.parse(path.read_text())


def function(engine: str, relpath: str, qualname: str, namespace: dict,
             version: str | None = None) -> Callable:
    """The function `qualname` ("f" or "Class.f") of the engine file (of release `version`,
    else the tests' release), without decorators."""
    path, tree = source_of(engine, relpath, version)
    node = _find(tree, qualname.split("."))
    node.decorator_list = []
    module = ast.Module(body=[node], type_ignores=[])
    scope = dict(namespace)
    exec(compile(module, str(path), "exec"), scope)  # noqa: S102 - the engine's own code
    return scope[node.name]


def statements(engine: str, relpath: str, qualname: str, keep: Callable[[str], bool],
               version: str | None = None) -> Callable:
    """The top-level statements of function `qualname` whose source `keep` selects, as a
    function of one dict: the names they read, updated with the names they bind."""
    path, tree = source_of(engine, relpath, version)
    text = path.read_text()
    node = _find(tree, qualname.split("."))
    chosen = [s for s in node.body if keep(ast.get_source_segment(text, s) or "")]
    assert chosen, f"{qualname} in {relpath} has no statement the test selects"
    code = compile(ast.Module(body=chosen, type_ignores=[]), str(path), "exec")

    def run(scope: dict) -> dict:
        exec(code, scope)  # noqa: S102 - the engine's own code
        return scope

    return run


def _find(tree: ast.AST, names: list[str]) -> ast.FunctionDef:
    for node in getattr(tree, "body", []):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == names[0]:
            return node if len(names) == 1 else _find(node, names[1:])
    raise LookupError(f"{'.'.join(names)} is not in the engine's file: {textwrap.shorten(str(names), 80)}")


def sglang_cp_hook(setitem: Callable, version: str | None = None) -> Callable:
    """SGLang's handle_context_parallelism (arg_groups/parallel_hook.py) of `version`, its
    imports stubbed through `setitem` (a monkeypatch's, on sys.modules): the CP layers' package
    and the connector parser, which the argument checks never reach."""
    for name in ("sglang", "sglang.srt", "sglang.srt.layers", "sglang.srt.layers.cp"):
        setitem(sys.modules, name, types.ModuleType(name))
    cp_base = types.ModuleType("sglang.srt.layers.cp.base")
    cp_base.init_cp_strategy = lambda **kw: None  # type: ignore[attr-defined]
    setitem(sys.modules, "sglang.srt.layers.cp.base", cp_base)
    connector = SimpleNamespace(INSTANCE="instance")
    return function("sglang", "sglang/srt/arg_groups/parallel_hook.py", "handle_context_parallelism", {
        "run_hook": lambda *a: None, "validate_prefill_cp_platform": None,
        "resolving_view": lambda args: args, "resolved_view": lambda args: args,
        "parse_connector_type": lambda path: connector.INSTANCE, "ConnectorType": connector}, version)
