"""Property: every valid spec gets an answer from every command, never an internal error.

Hypothesis draws specs over engine x method x sampling (greedy, sampling, mixed) x topology
(tp, pp, dp with and without DP-attention, cp, dcp, ep, MoE) x sync policy, group and idle
ranks x pipeline knobs x behaviour; the schema decides what is valid (refused draws are
discarded). Each spec goes through the real CLI: explain (tables, --json, --rank, every
picture), compile twice (byte-identical plan.json and runtime module), check of the written
plan.json, and export to both engines. Exit 1 (an internal error) fails the property; 0, 2
and 3 are answers. The default run draws a few examples; the slow marker draws many more
and simulates a seeded sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from specplan.errors import SpecError
from specplan.methods import METHODS
from specplan.schema import load_spec
from tests.helpers import cli, draw_dp_attention_and_ep

STEPS = {"none": {}, "eagle": {"num_steps": 3, "topk": 2, "num_draft_tokens": 5},
         "eagle3": {"num_steps": 2}, "mtp": {"num_steps": 1}, "standalone": {"num_steps": 3},
         "ngram": {"num_steps": 3}, "dflash": {"num_steps": 4}, "dspark": {"num_steps": 3}}
QUICK = settings(max_examples=5, deadline=None, derandomize=True,
                 suppress_health_check=list(HealthCheck))
MANY = settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def spec_data(draw) -> dict:
    engine = draw(st.sampled_from(["sglang", "vllm"]))
    moe = draw(st.booleans())
    tp, pp, dp, cp = (draw(st.sampled_from(v)) for v in ([1, 2, 4], [1, 2, 3], [1, 2], [1, 2]))
    topo = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "dcp": draw(st.sampled_from([1, 2])),
            "device": draw(st.sampled_from(["cpu", "cuda"]))}
    draw_dp_attention_and_ep(draw, engine, topo, moe)
    method = draw(st.sampled_from(sorted(METHODS)))
    speculative = {"method": method, **STEPS[method]}
    if method != "none":
        speculative["sampling"] = draw(st.sampled_from(["greedy", "sampling", "mixed"]))
    model = {"num_layers": draw(st.sampled_from([6, 9])), "hidden_size": 64, "vocab_size": 128}
    if moe:
        model["moe"] = {"num_experts": 4, "top_k": 2}
    pick = lambda *v: draw(st.sampled_from(v))  # noqa: E731
    return {"name": "prop", "engine": engine, "behaviour": pick("specplan", "engine"),
            "topology": topo, "model": model, "speculative": speculative,
            "sync": {"policy": pick("safe", "all", "rng", "init", "off"),
                     "group": pick("replica", "replica", "attn_tp", "tp"),
                     "idle_ranks": pick("dummy", "dummy", "skip")},
            "pipeline": {"relay": pick("broadcast", "column", "ring"),
                         "aux_routing": pick("chain", "direct"), "relay_drafts": pick(True, False),
                         "payload_width": pick("pinned", "agreed", "dynamic"),
                         "draft_layer_ids": pick("global", "stage_local"),
                         "tap_ids": pick("global", "stage_local")},
            "runtime": {"max_batch": pick(1, 4), "timeout_s": 20}}


def valid_spec(tmp: Path, data: dict) -> Path:
    path = tmp / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        load_spec(path)
    except SpecError:
        assume(False)
    return path


def answer(*args: str) -> int:
    """Run the CLI in process; an exception other than SystemExit is an internal error."""
    res = cli(*args)
    assert res.exit_code != 1 and not (res.exception and not isinstance(res.exception, SystemExit)), \
        f"specplan {' '.join(args)} -> exit {res.exit_code}\n{res.output}\n{res.exception!r}"
    assert res.exit_code in (0, 2, 3), (args, res.exit_code, res.output)
    return res.exit_code


def every_command(tmp: Path, data: dict) -> None:
    spec = str(valid_spec(tmp, data))
    for view in ([], ["--json"], ["--rank", "0"], ["--json", "--rank", "0"]):
        assert answer("explain", spec, *view) == 0
    for kind, fmt in (("ranks", "svg"), ("round", "svg"), ("round", "mermaid"), ("round", "dot")):
        assert answer("explain", spec, "--picture", kind, "--format", fmt, "-o", str(tmp / f"p.{fmt}")) == 0
    first = answer("compile", spec, "-o", str(tmp / "a"))
    again = answer("compile", spec, "-o", str(tmp / "b"))
    assert first == again
    if first == 0:
        for f in (tmp / "a").iterdir():
            assert f.read_bytes() == (tmp / "b" / f.name).read_bytes(), f.name
        assert answer("check", str(tmp / "a" / "plan.json"), "--json") == 0
    else:
        assert answer("check", spec) == 3
    for engine in ("sglang", "vllm"):
        answer("export", spec, "--engine", engine)


@QUICK
@given(data=spec_data())
def test_every_valid_spec_gets_an_answer(tmp_path_factory, data):
    every_command(tmp_path_factory.mktemp("prop"), data)


@pytest.mark.slow
@MANY
@given(data=spec_data())
def test_every_valid_spec_gets_an_answer_many(tmp_path_factory, data):
    every_command(tmp_path_factory.mktemp("prop"), data)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=spec_data())
def test_a_seeded_sample_simulates(tmp_path_factory, data):
    """A short simulate of small cpu worlds: a clean spec passes, a spec check rejects is
    refused with exit 3; never an internal error."""
    data["topology"]["device"] = "cpu"
    tmp = tmp_path_factory.mktemp("sim")
    spec = str(valid_spec(tmp, data))
    explained = cli("explain", spec, "--json")
    assume(json.loads(explained.output)["world_size"] <= 4)
    clean = cli("check", spec).exit_code == 0
    code = answer("simulate", spec, "--rounds", "2", "--requests", "2")
    assert code == (0 if clean else 3)
