"""plan.json in: every golden loads and dumps back byte for byte; malformed plans and hand
edits are refused with exit 2 by check, preflight and bind, naming the key or the edit."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from specplan.plan import PlanFileError, load_plan
from tests.helpers import COLUMN_SPEC, cli

ROOT = Path(__file__).parents[2]
GOLDEN = sorted((ROOT / "tests" / "golden" / "plans").glob("*.json"))
BASE = ROOT / "tests" / "golden" / "plans" / "dspark-greedy-pp2.json"
VALIDATOR = jsonschema.Draft202012Validator(json.loads((ROOT / "docs" / "plan.schema.json").read_text()))
EDITED = "plan.json was edited after compile"


def base() -> dict:
    return json.loads(BASE.read_text())


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_round_trips(path: Path):
    assert load_plan(str(path)).dumps() == path.read_text()


def _set(path: tuple, value):
    def edit(plan: dict) -> None:
        *head, last = path
        node = plan
        for key in head:
            node = node[key]
        if value is KeyError:
            del node[last]
        else:
            node[last] = value
    return edit


# (what the issue lists, the edit, the dotted path the message names)
MALFORMED = [
    ("boundaries removed", _set(("boundaries",), KeyError), "boundaries: missing key"),
    ("boundaries a string", _set(("boundaries",), "none"), "boundaries: expected an array, found a string"),
    ("world_size -1", _set(("world_size",), -1), "world_size: must be >= 1, found -1"),
    ("world_size NaN", _set(("world_size",), float("nan")), "world_size: expected an integer, found nan"),
    ("op bytes a string", _set(("rank_classes", 0, "program", "decode", 0, "bytes"), "352"),
     "rank_classes[0].program.decode[0].bytes: expected an integer, found a string '352'"),
    ("a stray key", _set(("ranks",), [0, 1, 2, 3]), "ranks: unknown key"),
    ("unknown family", _set(("sites", 0, "family"), "nowhere"), "sites[0].family: names no family: 'nowhere'"),
]


def _write(tmp_path: Path, plan: dict) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=1))
    return str(path)


@pytest.mark.parametrize("what, edit, message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_plans_name_the_key(tmp_path, what, edit, message):
    plan = base()
    edit(plan)
    path = _write(tmp_path, plan)
    with pytest.raises(PlanFileError) as err:
        load_plan(path)
    assert f"{path}: {message}" in str(err.value)
    assert not VALIDATOR.is_valid(plan) or what == "unknown family"  # the schema refuses it too


def test_only_a_schema_version_names_every_missing_key(tmp_path):
    path = _write(tmp_path, {"schema_version": 3})
    with pytest.raises(PlanFileError) as err:
        load_plan(path)
    for key in ("name", "boundaries", "rank_classes", "fingerprint"):
        assert f"{path}: {key}: missing key" in str(err.value)


HAND_EDITS = [
    ("a renamed family", lambda p: [p["families"][0].update(name="tp2")]),
    ("a source_member of 99", _set(("sites", 0, "source_member"), 99)),
    ("a changed buffer_bytes", _set(("buffer_bytes", "replica"), 360)),
    ("a zeroed fingerprint", _set(("fingerprint",), "0" * 64)),
    ("a removed name", _set(("name",), KeyError)),
    ("a changed op width", _set(("rank_classes", 1, "program", "decode", 1, "bytes"), 344)),
]


@pytest.mark.parametrize("what, edit", HAND_EDITS, ids=[e[0] for e in HAND_EDITS])
def test_hand_edits_are_refused(tmp_path, what, edit):
    plan = base()
    edit(plan)
    path = _write(tmp_path, plan)
    with pytest.raises(PlanFileError, match=EDITED):
        load_plan(path)


def test_an_older_schema_version_says_to_recompile(tmp_path):
    plan = base()
    plan["schema_version"] = 1
    with pytest.raises(PlanFileError, match=r"older specplan \(schema_version 1.*re-run `specplan compile`"):
        load_plan(_write(tmp_path, plan))


def test_the_schema_and_the_loader_agree_on_trusted_edits():
    """Edits the fingerprint would catch, loaded `trusted`: what the schema refuses, the typed
    loader refuses too (it checks the same types, bounds and choices)."""
    edits = [_set(("device",), "tpu"), _set(("sites", 0, "kind"), "gather"),
             _set(("boundaries", 1, "layout", "fields", 0, "dtype"), "int8"),
             _set(("runtime", "probe_every"), -1), _set(("speculative", "topk"), 0),
             _set(("pipeline", "relay", "mode"), "fanout"), _set(("sites", 0, "converge"), "yes")]
    for edit in edits:
        plan = copy.deepcopy(base())
        edit(plan)
        assert not VALIDATOR.is_valid(plan)
        with pytest.raises(PlanFileError):
            load_plan(plan, trusted=True)


@pytest.mark.parametrize("command", [("specplan.cli", "check"), ("specplan.runtime.preflight",)],
                         ids=["check", "preflight"])
def test_commands_exit_2_without_a_traceback(tmp_path, command):
    program, *verb = command
    plan = base()
    del plan["boundaries"]
    path = _write(tmp_path, plan)
    run = cli(*verb, path, process=True, program=program)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert f"{path}: boundaries: missing key" in run.stderr
    edited = base()
    edited["sites"][0]["source_member"] = 99
    run = cli(*verb, _write(tmp_path, edited), process=True, program=program)
    assert run.returncode == 2 and EDITED in run.stderr and "Traceback" not in run.stderr


def test_bind_refuses_before_any_process_group(tmp_path):
    torch_distributed = pytest.importorskip("torch.distributed")
    from specplan.runtime import bind

    plan = base()
    plan["boundaries"] = "none"
    with pytest.raises(PlanFileError, match="boundaries: expected an array"):
        bind(_write(tmp_path, plan), rank=0, world_size=4)
    assert not torch_distributed.is_initialized()


def test_a_plan_with_relays_states_their_wire_layout(tmp_path):
    """tp 2 x pp 2 with relay: column (issue 13): each relay has its header id, packed layout
    and the pp buffer it sends; the planner, plan.json and the runtime's view agree."""
    from specplan import compile
    from specplan.plan import PlanView
    from specplan.schema import load_spec

    spec = tmp_path / "spec.yaml"
    spec.write_text(COLUMN_SPEC)
    plan = compile(load_spec(spec))
    data = plan.to_json()
    assert VALIDATOR.is_valid(data), [e.message for e in VALIDATOR.iter_errors(data)]
    relays = data["pipeline"]["relay"]["sites"]
    assert [r["id"] for r in relays] == [65536 + i for i in range(len(relays))]
    pp_buffer = data["buffer_bytes"]["pp"]
    assert pp_buffer == max(r["layout"]["bytes"] for r in relays) == 352  # 32 header + 320 drafts
    for r in relays:
        assert r["buffer_bytes"] == pp_buffer
        assert r["bytes"] == sum(f["bytes"] for f in r["layout"]["fields"])
        assert r["layout"]["header_bytes"] == 32 and r["layout"]["fields"][0]["offset"] == 32
    view = PlanView(plan)
    assert view.family_buffer_bytes()["pp"] == pp_buffer
    assert {r.buffer_bytes for r in view.relays} == {pp_buffer}
    assert load_plan(data).dumps() == plan.dumps()


def test_optional_keys_when_set_satisfy_the_schema():
    """Keys absent at their defaults (runtime.async_scheduling, model.moe.eplb) are in the schema too."""
    import yaml

    from specplan import compile
    from specplan.schema.load import load_spec_text

    data = yaml.safe_load((ROOT / "specs" / "deepseek-v4-dspark-tp8-dp8.yaml").read_text())
    data["runtime"]["async_scheduling"] = True
    data["model"]["moe"]["eplb"] = True
    plan = json.loads(compile(load_spec_text(yaml.safe_dump(data), "t.yaml")).dumps())
    assert plan["runtime"]["async_scheduling"] is True and plan["model"]["moe"]["eplb"] is True
    VALIDATOR.validate(plan)
