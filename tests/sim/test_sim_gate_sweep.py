"""check and simulate never disagree on gates, over drawn specs (issue 34 item 4).

A seeded random draw (uniform, so the rarer knobs come up in a small sample) of specs where gates arise: engine x method x topology (tp, dp, DP-attention, cp)
on a CUDA device (the graph and memory gates), a MoE model now and then (vLLM's lockstep DP),
engine behaviour or specplan's plan, sync policy, and the launch-line options the gates read
(`--speculative-adaptive`, `SGLANG_RAGGED_VERIFY_MODE=compact`, `--disable-overlap-schedule`,
`--disable-cuda-graph`, `--enable-batch-sharded-sampling`, vLLM's adaptive verification). Each
spec is checked, and one whose plan has gates is simulated with `--inject gate` (every rank its
own reading at every gate): a GateMismatch only ever names a gate check called an ERROR; a spec
whose ERRORs are all gate findings fails by such a name (exit 3); one with other ERRORs fails
(exit 3); a clean check PASSes (exit 0).

Default suite: a few specs of two ranks; `-m slow`: a larger sample. `python
tests/sim/test_sim_gate_sweep.py N [SEED]` draws N specs and prints the counts.
"""

from __future__ import annotations

import json
import random
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.helpers import cli

MAX_RANKS = 4
ADAPTIVE_VLLM = ("--speculative-config '{\"method\":\"dspark\",\"num_speculative_tokens\":3,"
                 "\"enable_adaptive_verification\":true}'")


def draw_spec(rng: random.Random) -> dict:
    engine = rng.choice(("sglang", "vllm"))
    # The methods with start-up and budget gates twice as often; two TP ranks twice as often.
    method = rng.choice(("eagle", "eagle3", "mtp", "ngram", "dflash", "dspark", "dflash", "dspark"))
    tp, dp = rng.choice((1, 2, 2)), rng.choice((1, 2))
    topo: dict = {"tp": tp, "dp": dp, "device": "cuda"}
    if engine == "sglang" and dp > 1 and tp == 2:
        topo["dp_attention"] = topo["dp_lm_head"] = rng.random() < 0.5
    if engine == "vllm" and dp == 1:
        topo["cp"] = rng.choice((1, 1, 2))
    model: dict = {"num_layers": 4, "hidden_size": 64, "vocab_size": 512}
    if rng.random() < 0.5:
        model["moe"] = {"num_experts": 4, "top_k": 2}
    sp: dict = {"method": method, "num_steps": 3, "sampling": rng.choice(("greedy", "sampling"))}
    if method in ("eagle", "eagle3", "mtp"):
        sp.update(topk=1, num_draft_tokens=4)
    if method in ("eagle3", "dflash", "dspark"):
        sp["aux_layers"] = [1, 2, 3]
    spec = {"name": "drawn", "engine": engine, "behaviour": rng.choice(("engine", "engine", "specplan")),
            "topology": topo, "model": model, "speculative": sp}
    if rng.random() < 0.4:
        spec["sync"] = {"policy": rng.choice(("safe", "init", "off"))}
    args = _engine_args(rng, engine, method)
    if args:
        spec["engine_args"] = args
    return spec


def _engine_args(rng: random.Random, engine: str, method: str) -> list[str]:
    """The launch-line options a gate reads, drawn each on or off."""
    if engine == "sglang":
        knobs = ["--disable-cuda-graph", "--disable-overlap-schedule"]
        knobs += ["--speculative-adaptive"] if method in ("eagle", "eagle3") else []
        env = ["SGLANG_RAGGED_VERIFY_MODE=compact"] if method == "dspark" and rng.random() < 0.5 else []
        picked = [k for k in knobs if rng.random() < 0.5]
        return [*env, "python -m sglang.launch_server", *picked] if env or picked else []
    knobs = ["--enable-batch-sharded-sampling"] + ([ADAPTIVE_VLLM] if method == "dspark" else [])
    return [k for k in knobs if rng.random() < 0.5]


def drawn(n: int, seed: int, most_ranks: int = MAX_RANKS) -> list[dict]:
    rng, out = random.Random(seed), []
    while len(out) < n:
        spec = draw_spec(rng)
        if world(spec) <= most_ranks:
            out.append(spec)
    return out


def world(spec: dict) -> int:
    t = spec["topology"]
    return t["tp"] * t.get("cp", 1) * (t["dp"] if spec["engine"] == "vllm" else 1)


def one(spec: dict, where: Path, counts: Counter, sim: bool) -> None:
    """Check `spec`; with `sim`, simulate it with every gate injected; assert they agree."""
    path = where / "drawn.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    checked = cli("check", str(path), "--json", code=(0, 2, 3))
    counts[f"check exit {checked.returncode}"] += 1
    if checked.returncode == 2:
        return
    errors = [f for f in json.loads(checked.stdout)["findings"] if f["severity"] == "ERROR"]
    gate_errors = {f["gate"] for f in errors if f.get("gate")}
    gates = json.loads(cli("explain", str(path), "--json", code=0).stdout)["round"]["gates"]
    counts.update(f"gate {g['gate']}: {'ERROR' if g['gate'] in gate_errors else 'clean'}" for g in gates)
    if not sim or not gates or world(spec) > MAX_RANKS:
        return
    run = cli("simulate", str(path), "--rounds", "2", "--requests", "2", "--inject", "gate",
              *(["--allow-errors"] if errors else []))
    out = " ".join(run.stdout.split())
    named = set(re.findall(r"GateMismatch: gate (\w+) \(", out))
    context = (path.read_text(), [f["message"] for f in errors], out[-3000:], run.stderr[-2000:])
    kind = "gate ERROR" if gate_errors else "other ERROR" if errors else "clean"
    counts[f"simulated: {kind}, exit {run.returncode}{', GateMismatch' if named else ''}"] += 1
    assert named <= gate_errors, context  # never a mismatch at a gate check calls agreed
    if gate_errors and len(gate_errors) == len(errors):
        assert run.returncode == 3 and named, context  # fails by the name of a gate check named
    elif errors:
        assert run.returncode == 3 and "FAIL" in out, context
    else:
        assert run.returncode == 0 and "PASS" in out, context


COUNTS: Counter = Counter()


@pytest.mark.parametrize("spec", drawn(3, seed=0, most_ranks=2), ids=lambda s: "-".join(
    (s["engine"], s["speculative"]["method"], s["behaviour"])))
def test_a_drawn_gate_spec_simulates_as_check_says(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=True)


@pytest.mark.slow
@pytest.mark.parametrize("spec", drawn(80, seed=1), ids=lambda s: "-".join(
    (s["engine"], s["speculative"]["method"], s["behaviour"])))
def test_drawn_gate_specs_simulate_as_check_says(tmp_path, spec):
    one(spec, tmp_path, COUNTS, sim=True)


if __name__ == "__main__":  # counts for a closing note: python tests/sim/test_sim_gate_sweep.py N [SEED]
    with tempfile.TemporaryDirectory() as tmp:
        for i, s in enumerate(drawn(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1)):
            try:
                one(s, Path(tmp), COUNTS, sim=True)
            except AssertionError as exc:  # a disagreement: keep going, print it
                COUNTS["disagreements"] += 1
                print(f"--- disagreement:\n{str(exc)[-6000:]}", flush=True)
            print(i + 1, flush=True)
    print(json.dumps(dict(sorted(COUNTS.items())), indent=1))
