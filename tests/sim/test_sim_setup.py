"""The sim's spec: shrinking keeps stages and tap owners; the verdict can fail."""

from __future__ import annotations

from pathlib import Path

from specplan.engines import convention
from specplan.schema import load_spec
from specplan.sim.launch import Options, Outcome
from specplan.sim.report import verdict
from specplan.sim.setup import _remap_taps, prepare, sim_spec

DEEP = """
name: deep-pp4
engine: sglang
topology: {tp: 2, pp: 4}
model: {num_layers: 61, hidden_size: 7168, vocab_size: 129280}
speculative: {method: eagle3, num_steps: 3, aux_layers: [2, 16, 30, 45, 58]}
"""


def _owner(tap: int, counts: list[int]) -> int:
    start = 0
    for stage, n in enumerate(counts):
        if start < tap <= start + n or (tap == 0 and stage == 0):
            return stage
        start += n
    raise AssertionError(tap)


def _load(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return load_spec(path)


def test_shrinking_keeps_the_stages_and_which_stage_owns_each_tap(tmp_path):
    spec = _load(tmp_path, DEEP)
    data, shrunk, replicas = sim_spec(spec, requests=4, max_layers=16)
    old = convention("sglang").split_layers(61, 4)
    new = data["model"]["pp_partition"]
    assert len(new) == 4 and sum(new) == 16 and min(new) >= 1
    taps = data["speculative"]["aux_layers"]
    assert len(taps) == 5
    assert [_owner(t, new) for t in taps] == [_owner(t, old) for t in (2, 16, 30, 45, 58)]
    assert any(s.startswith("layers 61 -> 16") for s in shrunk)
    assert "hidden 7168 -> 64" in shrunk and replicas == 1
    assert data["topology"]["backend"] == "gloo" and data["runtime"]["probe_every"] == 1
    assert "device" not in data["topology"] and "sync" not in data  # only what the spec writes


def test_a_shallow_model_keeps_its_layers(tmp_path):
    spec = _load(tmp_path, DEEP.replace("61", "8").replace(", aux_layers: [2, 16, 30, 45, 58]", ""))
    data, shrunk, _ = sim_spec(spec, requests=4, max_layers=16)
    assert data["model"]["num_layers"] == 8 and not any(s.startswith("layers") for s in shrunk)


def test_the_collective_timeout_grows_with_the_ranks_sharing_the_cores(tmp_path):
    """20 s up to 8 ranks, 2.5 s a rank past them; --timeout-s as given."""
    timeouts = {}
    for topo in ("{tp: 2, pp: 4}", "{tp: 4, pp: 4}", "{tp: 8, pp: 4}"):
        spec = _load(tmp_path, DEEP.replace("{tp: 2, pp: 4}", topo))
        timeouts[topo] = sim_spec(spec, requests=4, max_layers=16)[0]["runtime"]["timeout_s"]
    assert list(timeouts.values()) == [20.0, 40.0, 80.0]
    spec = _load(tmp_path, DEEP)
    assert sim_spec(spec, requests=4, max_layers=16, timeout_s=7.5)[0]["runtime"]["timeout_s"] == 7.5


def test_remap_taps_keeps_tap_zero_and_distinct_ids():
    assert _remap_taps([0, 3, 4], [4, 4], [2, 2]) == [0, 1, 2]


def test_the_plan_of_a_dp_attention_spec_has_two_replicas(tmp_path):
    spec = _load(tmp_path, DEEP.replace("{tp: 2, pp: 4}", "{tp: 4, dp: 2, dp_attention: true}"))
    prep = prepare(spec, tmp_path / "out", requests=4, max_layers=16, seed=0)
    assert prep.replicas == 2 and prep.plan["world_size"] == 4
    assert prep.plan["runtime"]["max_batch"] == 2


def test_the_verdict_fails_on_ranks_that_disagree_or_errors(tmp_path):
    spec = _load(tmp_path, DEEP.replace("61", "4").replace(", aux_layers: [2, 16, 30, 45, 58]", ""))
    prep = prepare(spec, tmp_path / "out", requests=1, max_layers=16, seed=0)
    ok = {"rank": 0, "replica": 0, "tokens": {"0": [1, 2]}, "requests": [0], "commits": {}}
    bad = dict(ok, rank=1, tokens={"0": [1, 3]})
    v = verdict(Outcome(prep, Options(), {0: ok, 1: bad}, {0: 0, 1: 0}, 1.0, tmp_path))
    assert not v.ok and "emitted different tokens" in v.problems[0]
    dead = {"rank": 1, "error": "CollectiveTimeout: gone"}
    v = verdict(Outcome(prep, Options(), {0: ok, 1: dead}, {0: 0, 1: 3}, 1.0, tmp_path))
    assert not v.ok and v.problems == ["rank 1: CollectiveTimeout: gone"]


def test_the_verdict_compares_with_plain_greedy_decoding(tmp_path):
    spec = _load(tmp_path, DEEP.replace("61", "4").replace(", aux_layers: [2, 16, 30, 45, 58]", ""))
    prep = prepare(spec, tmp_path / "out", requests=1, max_layers=16, seed=0)
    wrong = {"rank": 0, "replica": 0, "tokens": {"0": [1, 2, 3]}, "requests": [0], "commits": {}}
    v = verdict(Outcome(prep, Options(), {0: wrong}, {0: 0}, 1.0, tmp_path))
    assert not v.ok and "plain greedy decoding gives" in v.problems[0]


ENGINE_SPECS = sorted((Path(__file__).resolve().parents[2] / "specs" / "engine").glob("*.yaml"))


def test_an_engine_spec_simulates_the_engines_own_plan(tmp_path):
    """The sim's plan converges, groups and sources exactly what the spec's own plan does."""
    from specplan import compile

    def sites(plan):
        return [(s.name, s.converge, s.family, s.source_member, s.reason) for s in plan.sites]

    for path in ENGINE_SPECS:
        spec = load_spec(path)
        own = compile(spec)
        prep = prepare(spec, tmp_path / path.stem, requests=4, max_layers=16, seed=0)
        assert prep.plan.behaviour.mode == "engine", path.name
        assert sites(prep.plan) == sites(own), path.name
        assert (prep.plan.device, prep.plan.backend) == (own.device, "gloo"), path.name


DSPARK = """
name: ds
engine: sglang
topology: {tp: 2}
model: {num_layers: 16, hidden_size: 64, vocab_size: 512}
speculative: {method: dspark, num_steps: 3, sampling: mixed}
"""


def test_shrinking_keeps_every_tap_inside_the_layer_loop(tmp_path):
    """SGLang captures taps 0 .. num_layers - 1: the default DSpark taps [2, 8, 13] of 16 layers
    stay below the shrunk model's end (4 layers: [1, 2, 3]), each apart (issue 37)."""
    spec = _load(tmp_path, DSPARK)
    data, shrunk, _ = sim_spec(spec, requests=4, max_layers=4)
    assert data["speculative"]["aux_layers"] == [1, 2, 3]
    assert "taps [2, 8, 13] -> [1, 2, 3]" in shrunk


def test_max_layers_too_few_for_the_taps_is_refused_naming_the_option(tmp_path):
    """`simulate --max-layers 2`: 3 taps cannot stay apart in 2 layers. Exit 2 at the user's
    model.num_layers naming the option and the least that holds them, never the sim's own
    temporary spec (the message pointed into <TMPDIR>/specplan-sim-*/ds.sim.yaml)."""
    from tests.helpers import cli

    path = tmp_path / "ds.yaml"
    path.write_text(DSPARK)
    res = cli("simulate", str(path), "--max-layers", 2, "--rounds", 1)
    assert res.exit_code == 2, res.output
    assert res.output.strip() == (
        f"{path}:5:9: model.num_layers: simulate --max-layers 2: a model of 2 layers cannot hold "
        "the spec's 3 taps [2, 8, 13] apart, each on the stage that owns it (layers per stage "
        "[16] -> [2]); use --max-layers 4 or more")
    assert "specplan-sim-" not in res.output and ".sim.yaml" not in res.output


def test_a_sim_spec_the_changes_make_invalid_points_at_the_users_file(tmp_path):
    """Whatever the sim's changes break is refused at the user's file, saying what changed."""
    import pytest

    from specplan.errors import PlanError
    from specplan.sim.setup import compile_data

    data = {"name": "bad", "engine": "sglang", "topology": {"tp": 1},
            "model": {"num_layers": 2, "hidden_size": 64, "vocab_size": 512},
            "speculative": {"method": "eagle3", "num_steps": 2, "aux_layers": [0, 1, 2]}}
    with pytest.raises(PlanError) as err:
        compile_data(data, tmp_path / "sim", "user.yaml", ["hidden 7168 -> 64"])
    assert [(d.file, d.line, d.path) for d in err.value.diagnostics] == [
        ("user.yaml", None, "speculative.aux_layers[2]")]
    assert "(simulate's CPU model: hidden 7168 -> 64)" in str(err.value)
    assert str(tmp_path) not in str(err.value)
