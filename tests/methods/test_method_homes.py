"""What a new method touches (issue 36): its file in methods/, one row in each engine's
methods.py, the schema's list of names, and tests. No other module names a method: everything
else asks the method's fields (methods/base.py) or its engine's row (engines/<engine>/methods.py
through the convention)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

from specplan.engines import RELEASES, convention
from specplan.methods import METHODS
from specplan.schema.model import MethodName

PACKAGE = Path(__file__).parents[2] / "specplan"


def _named_in() -> dict[str, set[str]]:
    """method -> the modules of specplan/ holding a string that is exactly its name."""
    found: dict[str, set[str]] = {name: set() for name in METHODS}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in found:
                found[node.value].add(str(path.relative_to(PACKAGE)))
    return found


NAMED_IN = _named_in()


# A gate an engine has for the method (engines/<engine>/gates.py, issue 34) is one more row.
GATES = {f"engines/{engine}/gates.py" for engine in RELEASES}


def homes(name: str) -> set[str]:
    """Where a method may be named: its own file (and a method it runs without a draft
    names it: EAGLE's without_draft), each engine's row (and gate), the schema's Literal."""
    by = {f"methods/{other}.py" for other, m in METHODS.items() if m.without_draft == name}
    return {f"methods/{name}.py", "schema/model.py", *by, *GATES,
            *(f"engines/{engine}/methods.py" for engine in RELEASES)}


# "none" is also a word for no a2a backend, no group, no connector: it is no new method.
@pytest.mark.parametrize("name", [n for n, m in METHODS.items() if m.speculates])
def test_a_method_is_named_only_in_its_file_its_rows_and_the_schema(name):
    assert NAMED_IN[name] - homes(name) == set()


@pytest.mark.parametrize("name", [n for n, m in METHODS.items() if m.speculates])
def test_a_new_method_touches_at_most_its_file_one_row_per_engine_and_the_schema(name):
    # methods/__init__.py imports the new file: one line in the catalogue. A method another
    # one resolves to (EAGLE runs as MTP without a draft) is named by that one, not by its own.
    others = {f"methods/{o}.py" for o, m in METHODS.items() if m.without_draft == name}
    touched = NAMED_IN[name] - others - GATES | {"methods/__init__.py"}
    assert len(touched) <= 1 + len(RELEASES) + 2, sorted(touched)  # 5 files besides tests


def test_the_schema_names_the_catalogue():
    assert get_args(MethodName) == tuple(METHODS)


@pytest.mark.parametrize("engine", sorted(RELEASES))
def test_each_engine_has_one_row_per_method(engine):
    assert list(convention(engine).methods.rows) == list(METHODS)


def test_the_scan_sees_a_method_named_elsewhere():
    tree = ast.parse('if spec.method in ("dspark", "dflash"): pass')
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)}
    assert {"dspark", "dflash"} <= names and "specplan/passes/x.py" not in homes("dspark")
