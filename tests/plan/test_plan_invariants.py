"""A plan.json edited and then re-fingerprinted (a tool that writes plans, or a person) is
still refused when it breaks what the planner guarantees (issue 21): `specplan check` exits 2
naming the key, instead of an IndexError or "no findings"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplan.plan.artifact import fingerprint
from tests.helpers import cli

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "qwen3-32b-eagle3-dp2-pp2-cp2.yaml"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("plan")
    res = cli("compile", str(SPEC), "-o", str(out))
    assert res.exit_code == 0, res.output
    return json.loads((out / "plan.json").read_text())


def family(plan: dict, name: str) -> dict:
    return next(f for f in plan["families"] if f["name"] == name)


def field(plan: dict, i: int = 0) -> dict:
    return next(b for b in plan["boundaries"] if len(b["layout"]["fields"]) > 1)["layout"]["fields"][i]


EDITS = {
    "tp strides outside the world": (lambda p: family(p, "tp")["rule"]["strides"].__setitem__(-1, 64),
                                      "families[0].rule.strides"),
    "world_size 3": (lambda p: p.__setitem__("world_size", 3), "numbers 16 ranks, but world_size is 3"),
    "widths.tp 3": (lambda p: p["widths"].__setitem__("tp", 3), "widths.tp: 3, but the tp family"),
    "timeout_s -1": (lambda p: p["runtime"].__setitem__("timeout_s", -1), "runtime.timeout_s: -1"),
    "a false group_size": (lambda p: family(p, "replica").__setitem__("group_size", 3), ".group_size"),
    "num_steps 0": (lambda p: p["speculative"].__setitem__("num_steps", 0), "speculative.num_steps"),
    "overlapping offsets": (lambda p: field(p, 1).__setitem__("offset", field(p, 0)["offset"]),
                            "fields are packed in order"),
    "bytes against dtype x shape": (lambda p: field(p).__setitem__("bytes", field(p)["bytes"] * 2),
                                    "bytes, but int"),
    "a stage past the model": (lambda p: p["pipeline"]["stages"][-1].__setitem__("end_layer", 99),
                               "pipeline.stages"),
    "a tap past the model": (lambda p: p["speculative"]["taps"].__setitem__(-1, 2**40), "speculative.taps"),
    "a site's boundary": (lambda p: next(s for s in p["sites"] if s["boundary"] is not None).__setitem__(
        "boundary", None), "sites["),
    "an op's sites": (lambda p: next(op for op in p["rank_classes"][0]["program"]["decode"]
                                     if "boundary" in op)["sites"].__setitem__(0, "x"), "of ['x']"),
    # issue 37's hostile sweep: in_flight 2**40 ran the schedule check out of memory
    "in_flight 2**40": (lambda p: p.__setitem__("in_flight", 2**40), "in_flight: 1099511627776 decode rounds"),
    "an op's bytes": (lambda p: next(op for op in p["rank_classes"][0]["program"]["decode"]
                                     if "boundary" in op).__setitem__("bytes", 8), "rank_classes[0].program.decode"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_refingerprinted_inconsistent_plan_is_refused(tmp_path, compiled, case):
    edit, expected = EDITS[case]
    plan = json.loads(json.dumps(compiled))
    edit(plan)
    plan["fingerprint"] = fingerprint(plan)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=1))
    res = cli("check", str(path))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert res.exit_code == 2, res.output
    assert f"{path}: " in res.output and expected in res.output, res.output


def test_the_plan_compile_wrote_passes(tmp_path, compiled):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(compiled, indent=1))
    assert cli("check", str(path)).exit_code == 0
