"""The SGLang plugin on the older releases (marker `versions`): it installs on every release
whose hooked functions have the signatures its hooks serve (engines/sglang/hooks.py
`plugin_releases`: 0.5.22, whose 19 targets are 0.5.23's), where a representative subset of
tests/engines/test_sglang_plugin.py runs on that wheel's real code; every other release is
refused when SGLang loads the plugin, with one line naming each difference, which is the
wheel's own (read with `ast` here as test_sglang_hooks.py reads it)."""

from __future__ import annotations

import json

import pytest
from test_sglang_hooks import _params
from test_sglang_plugin import (DPATTN_SOURCES, REFUSED, SPECULATIVE, ok, plan_for,
                                replicas_hold_their_sources, run, start, widths)
from wheels import engine_root

from specplan.engines.releases import RELEASES, newest
from specplan.engines.sglang.hooks import hooks, plugin_refusal, plugin_releases, unhandled

pytestmark = [pytest.mark.engines, pytest.mark.versions]
OLDER = [v for v in plugin_releases() if v != newest("sglang")]
REFUSED_RELEASES = [v for v in RELEASES["sglang"] if plugin_refusal(v)]


def test_the_plugin_runs_on_0_5_22_and_refuses_0_5_20_and_0_5_21():
    assert OLDER == ["0.5.22"] and REFUSED_RELEASES == ["0.5.20", "0.5.21"]


@pytest.mark.parametrize("version", OLDER)
def test_installs_each_hook_once(tmp_path, version):
    [out] = ok(run(1, "plugins", plan=plan_for(tmp_path, "tp2"), version=version))
    assert len(out["hooks"]) == 13 and out["per_target"] == [1]


@pytest.mark.parametrize("version", OLDER)
def test_the_plans_topology_passes_and_binds_on_sglangs_groups(tmp_path, version):
    _, results = start(4, "dpattn", tmp_path, version=version)
    outs = ok(results)
    assert [o["bound"]["replica"] for o in outs] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert [o["bound"]["source"] for o in outs] == [0, 0, 2, 2]


@pytest.mark.parametrize("version", OLDER)
def test_another_topology_and_other_speculative_settings_are_refused(tmp_path, version):
    _, results = start(4, "dpattn", tmp_path, engine=widths(tp=4), version=version)
    for r in results:
        assert r.returncode == REFUSED and "attn_tp: engine [0..3], plan " in r.stdout, r.stdout[-500:]
    _, results = start(2, "tp2", tmp_path, spec=dict(SPECULATIVE, speculative_num_steps=5),
                       version=version)
    for r in results:
        assert r.returncode == REFUSED and "num_steps: engine 5, plan 3" in r.stdout, r.stdout[-500:]


@pytest.mark.parametrize("version", OLDER)
def test_dpattn_accept_through_the_plugin_hands_each_replica_its_source(tmp_path, version):
    outs = ok(run(4, "accept", json.dumps(widths(tp=4, dp=2)), json.dumps(SPECULATIVE), "tp_group",
                  "DSPARK_ACCEPT_SAMPLE", plan=plan_for(tmp_path, "dpattn"), version=version))
    replicas_hold_their_sources(outs, DPATTN_SOURCES)


@pytest.mark.parametrize("version", REFUSED_RELEASES)
def test_a_release_whose_hooks_differ_is_refused_at_plugin_load_naming_each_difference(tmp_path, version):
    root = engine_root("sglang", version)
    base = hooks()
    differing = {t for t in base if _params(root, t) != base[t]}  # the wheel's own differences
    assert differing == set(unhandled(version))
    line = plugin_refusal(version)
    assert all(t in line for t in differing) and "the plugin runs on SGLang 0.5.22, 0.5.23" in line
    [r] = run(1, "plugins", plan=plan_for(tmp_path, "tp2"), version=version)
    assert r.returncode == REFUSED, (r.stdout[-500:], r.stderr[-2000:])
    assert f"REFUSED specplan: {line}" in r.stdout.splitlines()
