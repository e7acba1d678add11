"""Both engines' hook tables have one shape (engines/hooks.py): each release's hooks by role,
each wrapped role served by exactly one plugin body that declares it (plugins/roles.py). These
checks need no wheel (default suite); test_sglang_hooks.py and test_vllm_guard.py (`engines`)
check each entry against the wheel's own function."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specplan.engines.hooks import HookTable, UnknownRole
from specplan.engines.releases import RELEASES
from specplan.engines.sglang import hooks as sglang_hooks
from specplan.engines.vllm import hooks as vllm_hooks
from specplan.plugins.roles import UnservedHook, body_for, declared
from specplan.plugins.sglang import SGLangState
from specplan.plugins.sglang_draft import DraftHooks
from specplan.plugins.sglang_pp import PPRelay
from specplan.plugins.vllm import VllmState

SGLANG_TABLES = [sglang_hooks.table(v) for v in RELEASES["sglang"]]
SGLANG_BODIES = (SGLangState, DraftHooks, PPRelay)  # the classes whose methods are hook bodies
TABLES = [(t, (VllmState,)) for t in vllm_hooks.RELEASES] + [(t, SGLANG_BODIES) for t in SGLANG_TABLES]
IDS = [f"{t.engine}-{t.version}" for t, _ in TABLES]


def _served(hook, classes) -> list[str]:
    found = []
    for cls in classes:
        try:
            found += [f"{cls.__name__}.{body_for(cls, hook)}"]
        except UnservedHook:
            pass
    return found


@pytest.mark.parametrize("table,classes", TABLES, ids=IDS)
def test_each_role_is_one_row_and_each_wrapped_role_has_one_body(table, classes):
    assert len(set(table.roles())) == len(table.roles())
    for hook in table.hooks:
        served = _served(hook, classes) if hook.wrapped else []
        assert len(served) == (1 if hook.wrapped else 0), (hook.role, served)


@pytest.mark.parametrize("engine,tables,classes", [
    ("vllm", vllm_hooks.RELEASES, (VllmState,)), ("sglang", SGLANG_TABLES, SGLANG_BODIES)])
def test_every_body_serves_a_role_of_a_release(engine, tables, classes):
    rows = {(h.role, h.signature) for t in tables for h in t.hooks if h.wrapped}
    roles = {role for role, _ in rows}
    for cls in classes:
        for role, signature, name in declared(cls):
            assert role in roles, f"{cls.__name__}.{name} serves {role!r}, in no {engine} table"
            assert signature is None or (role, signature) in rows, (cls.__name__, name, signature)


def test_an_older_sglang_release_lists_only_roles_of_the_newest():
    base = set(sglang_hooks.BASE.roles())
    assert all(set(changed) <= base for changed in sglang_hooks.OLDER.values())


def test_a_role_the_table_lacks_is_refused_with_the_release_and_its_roles():
    table = vllm_hooks.RELEASES[-1]
    with pytest.raises(UnknownRole, match=rf"vllm {table.version}: .* no role 'reject'; it has world, accept"):
        table.hook("reject")


def test_a_renamed_function_is_one_changed_row_and_keeps_its_body():
    newest = vllm_hooks.RELEASES[-1]
    accept = newest.hook("accept")
    renamed = newest.differs("9.0.0", {"accept": replace(accept, qualname="RejectionSampler.sample")})
    assert renamed.target("accept").endswith("RejectionSampler.sample")
    assert [h for h in renamed.hooks if h != newest.hook(h.role)] == [renamed.hook("accept")]
    assert body_for(VllmState, renamed.hook("accept")) == body_for(VllmState, accept) == "reject"


def test_a_release_with_a_signature_no_body_serves_is_refused_with_the_names():
    newest = vllm_hooks.RELEASES[-1]
    changed = newest.differs("9.0.0", {"pp_receive": "(self, batch)"})
    with pytest.raises(UnservedHook, match=r"role 'pp_receive' \(.*PPHandler.receive\(self, batch\)\)"):
        body_for(VllmState, changed.hook("pp_receive"))


def test_sglang_tables_are_the_same_shape_as_vllms():
    assert all(isinstance(t, HookTable) for t in (*SGLANG_TABLES, *vllm_hooks.RELEASES))
    assert sglang_hooks.table().target("accept") == "sglang.srt.speculative.eagle_utils.eagle_sample"
    assert sglang_hooks.hooks()["speculative.eagle_utils.eagle_sample"] == sglang_hooks.BASE.hook("accept").signature
