"""No engine dispatch outside specplan/engines/: nothing compares an engine's name.

Whatever differs between SGLang and vLLM is asked of `convention(spec.engine)`; a comparison
such as `spec.engine == "sglang"`, `engine != target`, `engine in ("vllm",)` or
`"vllm" == x` anywhere else is a rule living outside its engine's one home.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "specplan"
HOME = PACKAGE / "engines"
ENGINE = r"(sglang|vllm)"
DISPATCH = re.compile(
    r"engine\w*\s*(==|!=)"  # engine == ..., spec.engine != ...
    r"|(==|!=)\s*\w*\.?engine\b"  # ... == spec.engine
    r"|engine\w*\s+(not\s+)?in\s*[(\[{]"  # engine in ("sglang", ...)
    rf"|(==|!=)\s*[\"']{ENGINE}[\"']|[\"']{ENGINE}[\"']\s*(==|!=)"  # x == "vllm", "vllm" != x
    rf"|\bin\s*[(\[{{]\s*[\"']{ENGINE}[\"']"  # x in ("sglang", ...)
)


def dispatches(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if DISPATCH.search(line)]


# Not dispatch: whether two engines are the same one (a plan compiled for another engine than
# the one loading it; an export translated to the other engine; a base spec of the same engine).
IDENTITY_CHECKS = {
    "specplan/plugins/common.py: if plan.engine != engine:",
    "specplan/ecosystem/export.py: if target.engine != spec.engine:",
    'specplan/ecosystem/export.py: if spec.behaviour == "specplan" and engine == spec.engine:',
    "specplan/commands/import_.py: if version is None and base is not None and base.engine == engine:",
}


def test_nothing_outside_engines_compares_an_engine_name():
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if path.suffix not in (".py", ".j2") or HOME in path.parents:
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}: {line}" for line in dispatches(path.read_text())]
    assert [f for f in found if f not in IDENTITY_CHECKS] == []


@pytest.mark.parametrize("line", [
    'if spec.engine == "sglang":', "ints = 7 if p.spec.engine == 'sglang' else 1",
    "if engine != spec.engine:", "if target == spec.engine:", 'if engine in ("sglang", "vllm"):',
    'split = a if "vllm" == name else b', 'if name in ["vllm"]:', "k == 'device' and x != 'vllm'",
])
def test_the_grep_sees_dispatch(line):
    assert dispatches(line) == [line]


@pytest.mark.parametrize("line", [
    'ENGINES = {"sglang": SGLang(), "vllm": VLLM()}', "conv = convention(spec.engine)",
    'Engine = Literal["sglang", "vllm"]', '"engine": spec.engine,',
])
def test_the_grep_lets_selection_by_table_be(line):
    assert dispatches(line) == []


# A table keyed by an engine's name: {"sglang": ..., "vllm": ...}, or by a pair of them.
TABLE = re.compile(rf"[\"']{ENGINE}[\"']\s*:|\(\s*[\"']{ENGINE}[\"']\s*,\s*[\"']{ENGINE}[\"']\s*\)\s*:")
# Homes of engine-keyed tables: each engine's package and the plugins that run inside the engines
# (their tables of the engine's own objects). The methods hold none: each engine's name for a
# method, and how it runs it, is its row (engines/<engine>/methods.py).
TABLE_HOMES = (HOME, PACKAGE / "plugins")


def test_no_engine_keyed_table_outside_its_homes():
    """What differs by engine lives in engines/<engine>/ (or is declared at its code with
    engines.base.PerEngine), so a new engine release is one place to change."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if any(home in path.parents for home in TABLE_HOMES):
            continue
        found += [f"{path.relative_to(PACKAGE.parent)}:{i}: {line.strip()}"
                  for i, line in enumerate(path.read_text().splitlines(), 1) if TABLE.search(line)]
    assert found == []


@pytest.mark.parametrize("line", [
    'FLAGS = {"sglang": SGLangFlags(), "vllm": VllmFlags()}', "PAGE = {'vllm': 16}",
    '_REWRITES = {("sglang", "vllm"): _to_vllm}',
])
def test_the_grep_sees_engine_tables(line):
    assert TABLE.search(line)


@pytest.mark.parametrize("line", [
    'description="sglang: DP inside the TP block"', 'Engine = Literal["sglang", "vllm"]',
    "READERS[conv]",
])
def test_the_grep_lets_other_lines_be(line):
    assert not TABLE.search(line)


def test_the_methods_name_no_engine():
    """methods/ is specplan's own method data: no key, value or field names an engine (its
    docs may cite an engine's code)."""
    from specplan.methods.base import Method, Site

    found = [f"{path.name}:{node.lineno}: {node.value!r}"
             for path in sorted((PACKAGE / "methods").glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Constant) and node.value in ("sglang", "vllm")]
    fields = [f for cls in (Method, Site) for f in cls.__dataclass_fields__
              if re.search(r"engine|sglang|vllm", f)]
    assert found == [] and fields == []


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_an_engines_tables_live_in_its_package(engine):
    """A new engine is one package: its convention, its method rows, its launch table, its
    hook tables and its handoff rules are all modules of engines/<engine>/."""
    from specplan.engines import convention

    conv, home = convention(engine), f"specplan.engines.{engine}"
    assert type(conv).__module__ == f"{home}.convention"
    assert conv.methods is importlib.import_module(f"{home}.methods").ROWS
    assert conv.launch is importlib.import_module(f"{home}.launch").LAUNCH
    for part in ("hooks", "handoff", "methods", "launch"):
        assert (HOME / engine / f"{part}.py").is_file()
