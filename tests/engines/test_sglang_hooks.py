"""specplan/engines/sglang/hooks.py is each SGLang release's own: every target the plugin hooks
or calls, found in that release's wheel with `ast` (its definition's parameter names), or
absent where the table says None. The newest release runs under `engines`, the older ones
under `versions`."""

from __future__ import annotations

import ast

import pytest
from wheels import engine_root

from specplan.engines.releases import RELEASES, newest
from specplan.engines.sglang.hooks import hooks

pytestmark = pytest.mark.engines
RELEASE_PARAMS = [pytest.param(v, marks=() if v == newest("sglang") else pytest.mark.versions)
                  for v in RELEASES["sglang"]]


def _params(root, target: str) -> str | None:
    parts = ("sglang.srt." + target).split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = root.joinpath(*parts[:cut]).with_suffix(".py")
        if not path.exists():
            continue
        node = ast.parse(path.read_text())
        for name in parts[cut:]:
            node = next((n for n in node.body if getattr(n, "name", None) == name), None)
            if node is None:
                return None
        a = node.args
        names = [x.arg for x in a.posonlyargs + a.args] + (["*" + a.vararg.arg] if a.vararg else [])
        names += [x.arg for x in a.kwonlyargs] + (["**" + a.kwarg.arg] if a.kwarg else [])
        return "(" + ", ".join(names) + ")"
    return None


@pytest.mark.parametrize("version", RELEASE_PARAMS)
def test_the_hook_table_is_the_wheels(version):
    root = engine_root("sglang", version)
    table = hooks(version)
    assert {t: _params(root, t) for t in table} == table

