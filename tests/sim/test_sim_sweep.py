"""check and simulate never disagree, over drawn specs (issue 21).

Hypothesis draws specs over method (none included) x sampling x topology (tp, pp up to 3, dp,
DP-attention, cp) x sync (policy, group, sites) x pipeline knobs, small enough for the CPU
(at most 4 ranks). Each is checked through the CLI: exit 0 (clean or warnings), 3 (an ERROR)
or 2 (a spec the schema or the planner refuses, with a message); never 1. A seeded sample is
then simulated with drawn options (sim_options, issue 37: --requests from 1 to one more than
the replicas, so a replica serves none, under sampling too; --max-layers below the model's
depth; --seed, --rounds, --json, --trace-dir, --timeout-s; now and then --inject or
--chunked-prefill): a clean spec PASSes (exit 0), an ERROR spec run with --allow-errors ends
as a named failure (exit 3, FAIL); a --max-layers the taps do not fit is exit 2 naming the
option (never the sim's own files); a fault or the serving loop may end 0, 2 or 3; never 1.

Default suite: a small budget; `-m slow`: a large one. `python tests/sim/test_sim_sweep.py N`
runs N drawn specs and prints the counts.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specplan.methods import get_method
from tests.helpers import cli

METHODS = ("none", "eagle", "eagle3", "mtp", "standalone", "ngram", "dflash", "dspark")
TREES = ("eagle", "eagle3", "mtp", "standalone", "ngram")
MAX_RANKS = 4


@st.composite
def specs(draw) -> dict:
    engine = draw(st.sampled_from(("sglang", "vllm")))
    method = draw(st.sampled_from(METHODS))
    tp, pp = draw(st.sampled_from((1, 2))), draw(st.integers(1, 3))
    dp, cp = draw(st.sampled_from((1, 2))), draw(st.sampled_from((1, 1, 2)))
    topo = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "device": "cpu"}
    if engine == "sglang" and dp > 1:
        topo["dp_attention"] = draw(st.booleans())
    sp = {"method": method, "sampling": draw(st.sampled_from(("greedy", "sampling", "mixed")))}
    if method != "none":
        sp["num_steps"] = draw(st.integers(1, 3))
        if method in TREES and draw(st.booleans()):
            sp["topk"] = 2
            sp["num_draft_tokens"] = draw(st.integers(2, 1 + 2 * sp["num_steps"]))
    layers = draw(st.integers(max(pp, 4), 8))
    model = {"num_layers": layers, "hidden_size": 64, "vocab_size": 512}
    if draw(st.integers(0, 4)) == 0:
        model["moe"] = {"num_experts": 4, "top_k": 2}
    spec = {"name": "drawn", "engine": engine, "topology": topo, "model": model,
            "speculative": sp}
    spec["sync"] = _sync(draw, method)
    spec["pipeline"] = _pipeline(draw)
    if draw(st.integers(0, 5)) == 0:
        spec["behaviour"] = "engine"
        spec.pop("sync"), spec.pop("pipeline")
    spec["_simulate"] = _sim_options(draw, spec)  # not YAML: the options simulate runs with
    return spec


def _sim_options(draw, spec: dict) -> list[str]:
    t = spec["topology"]
    replicas = t["dp"] if spec["engine"] == "vllm" or t.get("dp_attention") else 1
    opts = ["--rounds", str(draw(st.integers(1, 3))), "--requests", str(draw(st.integers(1, replicas + 1)))]
    if draw(st.integers(0, 2)) == 0:
        opts += ["--max-layers", str(draw(st.integers(1, spec["model"]["num_layers"])))]
    if draw(st.integers(0, 3)) == 0:
        opts += ["--seed", str(draw(st.sampled_from((1, 2**31, 2**63 - 1))))]
    for flag in ("--json", "--trace-dir"):
        if draw(st.integers(0, 4)) == 0:
            opts.append(flag)
    if draw(st.integers(0, 4)) == 0:
        opts += ["--timeout-s", "60"]
    if draw(st.integers(0, 7)) == 0:
        opts += ["--inject", draw(st.sampled_from(("noise", "draft-noise", "verify-noise", "tap-order",
                                                    "kill", "foreign-plan")))]
    elif draw(st.integers(0, 7)) == 0:
        opts += ["--chunked-prefill", str(draw(st.integers(1, 4)))]
    return opts


def _sync(draw, method: str) -> dict:
    sync = {}
    if draw(st.booleans()):
        sync["policy"] = draw(st.sampled_from(("safe", "all", "rng", "init", "off")))
    if draw(st.booleans()):
        sync["group"] = draw(st.sampled_from(("replica", "attn_tp", "tp")))
    if draw(st.integers(0, 3)) == 0:
        names = [s.name for s in get_method(method).sites]
        sync["sites"] = {draw(st.sampled_from(names)): draw(st.sampled_from(("on", "off")))}
    if draw(st.integers(0, 3)) == 0:
        sync["idle_ranks"] = "skip"
    return sync


def _pipeline(draw) -> dict:
    knobs = {"relay": ("broadcast", "column", "ring"), "aux_routing": ("chain", "direct"),
             "relay_drafts": (True, False), "payload_width": ("pinned", "agreed", "dynamic"),
             "draft_layer_ids": ("global", "stage_local"), "tap_ids": ("global", "stage_local")}
    return {k: draw(st.sampled_from(v)) for k, v in knobs.items() if draw(st.integers(0, 3)) == 0}


def world(spec: dict) -> int:
    t = spec["topology"]
    ranks = t["tp"] * t["pp"]
    return ranks * t["dp"] * t["cp"] if spec["engine"] == "vllm" else ranks


def check(path: Path) -> tuple[int, str]:
    res = cli("check", str(path), "--format", "json")
    assert res.exit_code in (0, 2, 3), (path.read_text(), res.output[-3000:])
    return res.exit_code, res.output


def simulate(path: Path, allow_errors: bool, opts: list[str]) -> tuple[int, str]:
    res = cli("simulate", str(path), *_with_dirs(opts, path.parent),
              *(["--allow-errors"] if allow_errors else []))
    return res.exit_code, res.output


def _with_dirs(opts: list[str], where: Path) -> list[str]:
    """--trace-dir drawn bare: a new folder of the test's own (hypothesis runs every example in
    one tmp_path, and simulate refuses a folder that already holds traces)."""
    out = []
    for o in opts:
        out += [o, tempfile.mkdtemp(prefix="traces-", dir=where)] if o == "--trace-dir" else [o]
    return out


def one(spec: dict, where: Path, counts: Counter, sim: bool) -> None:
    """Check `spec`; with `sim`, simulate it; assert they agree."""
    spec = dict(spec)
    opts = spec.pop("_simulate", ["--rounds", "3", "--requests", "2"])
    path = where / "drawn.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    code, out = check(path)
    counts[f"check exit {code}"] += 1
    if code == 2 or not sim or world(spec) > MAX_RANKS:
        return
    if code == 3 and "sample_discount" in out:  # seen by the serving loop (--chunked-prefill)
        return
    got, text = simulate(path, code == 3, opts)
    counts[f"simulated: check {'ERROR' if code == 3 else 'clean'}, simulate exit {got}"] += 1
    counts.update(f"simulate option {o}" for o in opts if o.startswith("--") and o != "--rounds")
    context = (path.read_text(), opts, out[-2000:], text[-4000:])
    assert got != 1 and "Traceback" not in text, context
    if "--inject" in opts or "--chunked-prefill" in opts:  # a fault, the serving loop
        assert got in (0, 2, 3), context
    elif got == 2 and "--max-layers" in opts:
        assert "simulate --max-layers" in text and "specplan-sim-" not in text, context
    elif "--json" in opts:
        report = json.loads(next(line for line in text.splitlines() if line.startswith("{")))
        assert got == (0 if code == 0 else 3) and report["exit_code"] == got, context
    elif code == 0:
        assert got == 0 and "PASS" in text, context
    else:
        assert got == 3 and "FAIL" in text, context


COUNTS: Counter = Counter()
_COMMON = dict(deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@settings(max_examples=25, **_COMMON)
@given(spec=specs())
def test_check_answers_every_drawn_spec(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=False)


@settings(max_examples=1, **_COMMON)
@given(spec=specs().filter(lambda s: world(s) <= 2))
def test_a_seeded_sample_simulates_as_check_says(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=True)


@pytest.mark.slow
@settings(max_examples=400, **_COMMON)
@given(spec=specs())
def test_check_answers_every_drawn_spec_large(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=False)


@pytest.mark.slow
@settings(max_examples=12, **_COMMON)
@given(spec=specs().filter(lambda s: world(s) <= MAX_RANKS))
def test_a_seeded_sample_simulates_as_check_says_large(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=True)


if __name__ == "__main__":  # counts for a closing note: python tests/sim/test_sim_sweep.py N [SIM]
    n, every = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0
    drawn = []

    @settings(max_examples=n, **_COMMON)
    @given(specs())
    def _draw(s):
        drawn.append(s)

    _draw()
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(drawn):
            try:
                one(s, Path(tmp), COUNTS, sim=bool(every) and i % every == 0)
            except AssertionError as exc:  # a disagreement: keep going, print it
                COUNTS["disagreements"] += 1
                print(f"--- disagreement:\n{str(exc)[-6000:]}", flush=True)
            print(i + 1, json.dumps(dict(sorted(COUNTS.items()))), flush=True)
    print(json.dumps(dict(sorted(COUNTS.items())), indent=1))
