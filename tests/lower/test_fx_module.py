"""The generated runtime module: one torch.fx program per (stage, round kind), emitted by
`specplan compile` beside plan.json, deterministic, importable, faithful to the plan's rank
class programs, and run for real on gloo ranks."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from specplan.lower.fx_module import build_graphs, module_name, render_module
from specplan.runtime import FingerprintMismatch
from tests.helpers import cli
from tests.ranks import launch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "runtime"))
import specs_rt  # noqa: E402

PP2_COLUMN = specs_rt.PP2_EAGLE3.replace("rt-pp2-eagle3", "rt-pp2-eagle3-column") + \
    "pipeline: {relay: column}\n"
# SGLang launches DSpark under pipeline parallel only on PD prefill nodes: compile (which
# verifies) runs the ring relay's decode rounds on vLLM.
VLLM_PP2_DSPARK_RING = specs_rt.TP4_PP2_DSPARK_RING.replace("engine: sglang", "engine: vllm")
SPECS = [  # (spec, world): tp 2 DSpark; pp 2 EAGLE3 with column relays; DP-attention with MoE;
    pytest.param(specs_rt.TP2_DSPARK, 2, id="tp2-dspark"),  # tp 4 x pp 2, converges and rings
    pytest.param(PP2_COLUMN, 2, id="pp2-eagle3-column"),
    pytest.param(specs_rt.TP4_DPATTN_EAGLE, 4, id="tp4-dpattn-eagle"),
    pytest.param(VLLM_PP2_DSPARK_RING, 8, id="tp4-pp2-dspark-ring"),
]
# On gloo ranks, the 8-rank case is the slow step's (specs_rt.EIGHT_RANKS).
GLOO_SPECS = [*SPECS[:-1], pytest.param(*SPECS[-1].values, id=SPECS[-1].id, marks=specs_rt.EIGHT_RANKS)]
GOLDEN = sorted((ROOT / "tests" / "golden" / "plans").glob("*.json"))
STEP_OPS = {"converge_boundary", "relay_site", "exchange_token_counts"}


def compile_cli(tmp: Path, text: str, out: str = "out") -> tuple[dict, Path, str]:
    spec = tmp / "spec.yaml"
    spec.write_text(text)
    res = cli("compile", str(spec), "-o", str(tmp / out))
    assert res.exit_code == 0, res.output
    plan = json.loads((tmp / out / "plan.json").read_text())
    return plan, tmp / out / f"{module_name(plan)}.py", res.output


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"{path.stem}_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def planned(plan: dict, stage: int, kind: str) -> list[tuple[str, object]]:
    """The collectives of a rank class program, read straight from plan.json."""
    cls = next(c for c in plan["rank_classes"] if c["rule"].get("pp", 0) == stage)
    out = []
    for op in cls["program"][kind]:
        if "boundary" in op:
            out.append(("converge_boundary", op["boundary"]))
        elif "site" in op and op["family"] == "pp":
            out.append(("relay_site", op["site"]))
        elif op.get("what") == "dp_token_counts":
            out.append(("exchange_token_counts", None))
    return out


def called(gm) -> list[tuple[str, object]]:
    out = []
    for n in gm.graph.nodes:
        name = getattr(n.target, "__name__", "")
        if n.op == "call_function" and name in STEP_OPS:
            out.append((name, None if name == "exchange_token_counts" else n.args[1]))
    return out


@pytest.mark.parametrize("text, world", SPECS)
def test_compile_writes_a_deterministic_importable_module(tmp_path, text, world):
    plan, path, output = compile_cli(tmp_path, text)
    assert f"wrote {path} (runtime module)" in output
    _, again, _ = compile_cli(tmp_path, text, out="again")
    assert again.read_bytes() == path.read_bytes()
    mod = load(path)
    assert mod.FINGERPRINT == plan["fingerprint"] and mod.NAME == plan["name"]
    assert list(mod.FAMILIES) == [f["name"] for f in plan["families"]]
    assert mod.BOUNDARIES == plan["boundaries"]
    assert mod.RELAYS == plan["pipeline"]["relay"]["sites"]
    stages = {c["rule"].get("pp", 0) for c in plan["rank_classes"]}
    assert set(mod.PROGRAMS) == {(s, k) for s in stages for k in ("startup", "prefill", "decode")}
    for (stage, kind), fn in mod.PROGRAMS.items():
        assert called(mod.graph(stage, kind)) == planned(plan, stage, kind), (stage, kind)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_every_golden_plan_lowers_to_its_programs_in_order(path):
    plan = json.loads(path.read_text())
    graphs = build_graphs(plan)
    for (stage, kind), gm in graphs.items():
        assert called(gm) == planned(plan, stage, kind), (stage, kind)
        accepts = [n for n in gm.graph.nodes if getattr(n.target, "__name__", "") == "finalize"]
        assert len(accepts) <= 1
    source = render_module(plan)
    compile(source, f"{module_name(plan)}.py", "exec")
    assert render_module(plan) == source


def test_graphs_name_collectives_and_the_module_states_the_plans_layouts(tmp_path):
    """Programs pass a boundary id (or relayed site) and decisions, never a family, source or
    layout the runtime could disagree with; the module's constants are plan.json's."""
    plan, path, _ = compile_cli(tmp_path, specs_rt.TP2_DSPARK)
    gm = build_graphs(plan)[(0, "decode")]
    nodes = {n.args[1]: n for n in gm.graph.nodes if getattr(n.target, "__name__", "") == "converge_boundary"}
    decode = [b for b in plan["boundaries"] if b["round"] == "decode"]
    assert decode and set(nodes) == {b["id"] for b in decode}
    for b in decode:
        decisions = {f["decision"] for f in b["layout"]["fields"]}
        assert set(nodes[b["id"]].kwargs) == {"round", "live_rows"} | decisions
    text = path.read_text()
    assert "def stage0_decode(rt, round_, live_rows, draft_tokens=None," in text
    assert f"Plan fingerprint {plan['fingerprint']}." in text
    mod = load(path)
    assert mod.BOUNDARIES == plan["boundaries"] and mod.RELAYS == plan["pipeline"]["relay"]["sites"]


def test_a_runtime_bound_to_another_plan_is_refused(tmp_path):
    plan, path, _ = compile_cli(tmp_path, specs_rt.TP2_DSPARK)
    mod = load(path)
    other = SimpleNamespace(rank=1, plan=SimpleNamespace(name="other", fingerprint="ab" * 32))
    with pytest.raises(FingerprintMismatch, match=f"generated for plan fingerprint {plan['fingerprint']} "
                       f"but rank 1 bound plan other with fingerprint {'ab' * 32}"):
        mod.check(other)
    with pytest.raises(FingerprintMismatch):  # before any collective
        mod.stage0_decode(other, 1, 4)
    with pytest.raises(KeyError, match=r"has no program \(1, 'decode'\)"):
        mod.program(1, "decode")


@pytest.mark.parametrize("text, world", GLOO_SPECS)
def test_generated_programs_converge_to_the_sources_values_on_gloo(tmp_path, text, world):
    plan, path, _ = compile_cli(tmp_path, text)
    results = launch(world, "engine", path.parent, path.stem, path.parent / "plan.json", 2,
                     module="fx_workers", path=(HERE,))
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["checks"] >= 4


BLOCK_TORCH = """
import sys

class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NoTorch())
from specplan.cli import main
main(["compile", sys.argv[1], "-o", sys.argv[2]])
"""


def test_compile_without_torch_writes_the_plan_and_says_it_skipped_the_module(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(specs_rt.TP2_DSPARK)
    run = subprocess.run([sys.executable, "-c", BLOCK_TORCH, str(spec), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "runtime module: skipped (torch is not installed; pip install 'specplan[runtime]')" in run.stdout
    assert (tmp_path / "out" / "plan.json").exists()
    assert not list((tmp_path / "out").glob("runtime_*.py"))


MIXED = [pytest.param(specs_rt.TP2_DSPARK.replace("method: dspark, num_steps: 3",
                                                  "method: dspark, num_steps: 3, sampling: mixed"), 2,
                      id="tp2-dspark-mixed"),
         pytest.param(VLLM_PP2_DSPARK_RING.replace("num_steps: 3}", "num_steps: 3, sampling: mixed}")
                      .replace("method: dspark", "method: dflash"), 8, id="tp4-pp2-dflash-mixed-ring",
                      marks=specs_rt.EIGHT_RANKS)]


@pytest.mark.parametrize("text, world", MIXED)
def test_a_mixed_batch_fires_one_accept_site_per_round_on_gloo(tmp_path, text, world):
    """Issue 13: compile of a mixed DSpark / DFlash plan asserted "two accept sites". Each
    decode program has one finalize, reading the site the engine names (accept_site)."""
    plan, path, _ = compile_cli(tmp_path, text)
    named = 0
    for (stage, kind), gm in build_graphs(plan).items():
        finals = [n for n in gm.graph.nodes if getattr(n.target, "__name__", "") == "finalize"]
        assert len(finals) <= 1, (stage, kind)
        named += sum(1 for n in finals if getattr(n.args[1], "name", "") == "accept_site")
    assert named >= 1
    assert "accept_site=None" in path.read_text()
    results = launch(world, "engine", path.parent, path.stem, path.parent / "plan.json", 3, "mixed",
                     module="fx_workers", path=(HERE,))
    for r in results:
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.result["checks"] >= 4
