"""Every plan the planner makes under behaviour specplan and default knobs verifies with no ERROR.

Swept with hypothesis over methods x sampling x policy x topologies (tp, pp, DP with and
without DP-attention, MoE, both engines). Policies that drop rng sites by design (init, off)
are swept with greedy decoding only: with sampling they are ERRORs, which the failure-class
specs cover.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specplan.errors import PlanError, SpecError
from specplan import compile
from specplan.schema import load_spec
from specplan.verify import verify

METHODS = ("none", "eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "dspark")
TAPS = ("eagle3", "dflash", "dspark")


@st.composite
def specs(draw) -> dict:
    method = draw(st.sampled_from(METHODS))
    sampling = draw(st.sampled_from(("greedy", "sampling", "mixed")))
    policies = ("safe", "all", "rng") + (("init", "off") if sampling == "greedy" else ())
    engine = draw(st.sampled_from(("sglang", "vllm")))
    tp, pp = draw(st.sampled_from((1, 2, 4))), draw(st.sampled_from((1, 2, 3)))
    dp_attention = engine == "sglang" and tp > 1 and draw(st.booleans())
    dp = draw(st.sampled_from((1, 2))) if not dp_attention else tp // draw(st.sampled_from((1, 2)))
    moe = dp_attention or draw(st.booleans())
    topology = {"tp": tp, "pp": pp, "dp": dp, "device": "cpu"}
    if dp_attention:
        topology["dp_attention"] = True
    model = {"num_layers": 12, "hidden_size": 64, "vocab_size": 512}
    if moe:
        model["moe"] = {"num_experts": 8, "top_k": 2}
        topology["ep"] = tp
    speculative = {"method": method, "sampling": sampling}
    if method != "none":
        speculative["num_steps"] = draw(st.sampled_from((1, 2, 3)))
    if method in TAPS:
        speculative["aux_layers"] = [1, 6, 10]
    if method in ("eagle", "eagle3", "mtp", "standalone"):
        speculative["topk"] = draw(st.sampled_from((1, 2)))
        if speculative["topk"] > 1:
            speculative["num_draft_tokens"] = speculative["num_steps"] * 2
    if method == "ngram":
        speculative["num_draft_tokens"] = 4
    return {"name": "sweep", "engine": engine, "topology": topology, "model": model,
            "speculative": speculative, "sync": {"policy": draw(st.sampled_from(policies))},
            "runtime": {"max_batch": 4}}


@settings(max_examples=int(os.environ.get("SPECPLAN_SWEEP_EXAMPLES", "60")), deadline=None,
          derandomize=True)
@given(spec=specs())
def test_planner_plans_verify_clean(spec):
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "spec.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        try:
            plan = compile(load_spec(str(path)))
        except (SpecError, PlanError):
            assume(False)  # a topology the schema or planner refuses is not a plan
            return
    assume(not isinstance(plan.launch_refusal, str))  # the engine would not start it
    errors = [f for f in verify(plan) if f.severity == "ERROR"]
    assert not errors, (spec, errors)
