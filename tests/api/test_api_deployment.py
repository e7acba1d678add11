"""`specplan.load` of a disaggregated deployment: both instances and the KV handoff, as the
commands give them, through the one public type `specplan.Deployment`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import specplan
import specplan.deploy
from specplan.errors import PlanError
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
PD = "specs/disagg/kimi-k3-dspark-pd.yaml"  # a deployment file
PEER = "specs/disagg/llama-eagle-decode-tp4-dpattn2.yaml"  # a spec naming its peer
SEED = ROOT / "tests/deploy/cases/error-layer-names-seed-dspark-pp2-pp1"


def test_one_public_deployment_type():
    assert specplan.Deployment is specplan.api.Deployment
    assert not hasattr(specplan.deploy, "Deployment")  # the loader's pair is InstancePair
    d = specplan.load(str(ROOT / PD))
    assert isinstance(d, specplan.Deployment) and isinstance(d.pair, specplan.deploy.InstancePair)
    assert d.disaggregated and list(d.instances) == ["prefill", "decode"]
    assert all(isinstance(i, specplan.Deployment) and not i.disaggregated
               for i in d.instances.values())
    assert not specplan.load(str(ROOT / "specs/kimi-k3-dspark-tp8-pp2.yaml")).disaggregated


@pytest.mark.parametrize("path", [PD, PEER])
def test_explain_check_export_equal_the_commands(at_root, path):
    d = specplan.load(path)
    assert d.explain() == json.loads(cli("explain", path, "--json", catch=False, code=(0, 3)).output)
    report = json.loads(cli("check", path, "--json", catch=False, code=(0, 3)).output)
    want = report["findings"] + report["instances"]["prefill"] + report["instances"]["decode"]
    assert [f.to_dict() for f in d.check()] == want
    assert d.export() == cli("export", path, catch=False, code=(0, 3)).output


def test_each_instance_is_the_deployment_s_instance(at_root):
    d = specplan.load(PD)
    for role, inst in d.instances.items():
        assert inst.explain() == d.explain()["instances"][role]
        rounds = {s["round"] for s in inst.explain()["round"]["sites"]} - {"startup"}
        assert rounds == {role}  # each instance plans its own role's rounds only


def test_compile_writes_what_the_command_writes(at_root, tmp_path):
    out = specplan.load(PD).compile(tmp_path / "api")
    cli("compile", PD, "-o", str(tmp_path / "cli"), catch=False, code=(0, 3))
    for name in ("prefill/plan.json", "decode/plan.json", "kv_handoff.json"):
        assert (tmp_path / "api" / name).read_text() == (tmp_path / "cli" / name).read_text()
    assert set(out) == {"prefill", "decode", "kv_handoff"}
    assert out["kv_handoff"] == json.loads((tmp_path / "cli/kv_handoff.json").read_text())["kv_handoff"]


def test_an_erroneous_pair_refuses_to_compile(tmp_path):
    # the seed's PP2 -> PP1 DSpark layer names, two instance specs as `check A B` takes them
    d = specplan.load(SEED / "prefill.yaml", SEED / "decode.yaml")
    kinds = {getattr(f, "kind", None) for f in d.check()}
    assert "layer-names" in kinds
    with pytest.raises(PlanError) as info:
        d.compile(tmp_path / "out")
    assert "layer-names" in "\n".join(map(str, info.value.diagnostics))
    assert not (tmp_path / "out").exists()


def test_no_torch_for_a_deployment():
    code = (f"import sys, specplan; d = specplan.load({PD!r}); d.explain(); d.check(); "
            "d.compile(); d.export(); print([m for m in ('torch', 'triton') if m in sys.modules])")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.slow
def test_simulate_a_deployment_through_the_api(tmp_path):
    path = tmp_path / "pd.yaml"
    path.write_text("name: pd\nengine: sglang\n"
                    "model: {num_layers: 4, hidden_size: 64, vocab_size: 512}\n"
                    "speculative: {method: eagle3, num_steps: 3}\n"
                    "instances:\n  prefill: {name: p, topology: {tp: 1}}\n"
                    "  decode: {name: d, topology: {tp: 2}}\n")
    report = specplan.load(path).simulate(rounds=3, requests=2)
    assert report.ok, report.problems
    assert report.world_size == 3 and report.requests_checked == 2


def test_a_deployment_s_plan_is_its_pair_of_plans():
    d = specplan.load(str(ROOT / PD))
    assert isinstance(d.plan, specplan.Pair) and isinstance(d.planning, specplan.Pair)
    assert d.plan.prefill is d.instances["prefill"].plan and d.plan.decode is d.instances["decode"].plan
    assert d.planning.decode.mesh.world_size == d.plan.decode.world_size
    assert d.compile()["prefill"] is d.plan.prefill


def test_a_deployment_compile_writes_both_instances_or_neither(tmp_path, monkeypatch):
    import specplan.io.files

    out = tmp_path / "out"
    out.mkdir()
    (out / "decode").write_text("a file where the decode instance's folder goes\n")
    run = cli("compile", str(ROOT / PD), "-o", str(out))
    assert run.exit_code == 2 and "cannot write" in run.stderr, run.output
    assert sorted(p.name for p in out.iterdir()) == ["decode"]  # prefill/ not written either

    def fail(*args, **kwargs):  # the last file, after both plans: nothing of them is left
        raise specplan.io.files.output_error(tmp_path / "pd", OSError(28, "No space left on device"))

    monkeypatch.setattr(specplan.io.files, "write_atomic", fail)
    with pytest.raises(specplan.errors.UserError):
        specplan.load(str(ROOT / PD)).compile(tmp_path / "pd")
    assert not (tmp_path / "pd").exists()
