"""The vLLM plugin across a world, against vLLM 0.33.0's real code (tests/engines/
vllm_world_workers.py): the plan reaches every Ray worker, and a world where some ranks hold
the plan and others do not is refused at start-up on every rank, naming the ranks.

vLLM's CPU platform refuses the Ray executor ("current platform cpu does not support ray"),
so Ray is proved at the function level: vLLM's own copy list, driver environment and worker
start, with Ray and the worker's device start as stand-ins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from vllm_harness import forkserver
from wheels import engine_root

from specplan.plugins.vllm_world import COPIED
from tests.helpers import compile_spec
from tests.ranks import launch

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.engines
REFUSED = 4
SPEC = json.dumps({"method": "eagle3", "num_speculative_tokens": 3})


def _plan(tmp: Path, topology: str, timeout_s: int = 300) -> Path:
    return compile_spec(tmp / "plan", f"""
name: world
engine: vllm
topology: {topology}
model: {{num_layers: 8, hidden_size: 64, vocab_size: 1000}}
speculative: {{method: eagle3, num_steps: 3, sampling: sampling}}
runtime: {{max_batch: 8, timeout_s: {timeout_s}}}
""")


def _run(world: int, worker: str, *args, plan: Path | None, env: dict | None = None):
    root = engine_root("vllm")
    env = {"SPECPLAN_PLAN": str(plan or ""), "VLLM_USE_V2_MODEL_RUNNER": "1",
           "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "SPECPLAN_HOT_PATH": "host",
           **(env or {})}
    return launch(world, worker, str(root), *args, module="vllm_world_workers",
                  preload=forkserver(root), path=(HERE,), env=env, timeout=300)


def _result(r) -> dict:
    assert r.returncode == 0, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
    return r.result


@pytest.mark.parametrize("tp,pp,without", [(2, 1, "1"), (2, 2, "0,3")])
def test_a_world_with_ranks_without_the_plan_is_refused_on_every_rank(tmp_path, tp, pp, without):
    plan = _plan(tmp_path, f"{{tp: {tp}, pp: {pp}}}")
    results = _run(tp * pp, "mixed", tp, pp, SPEC, without, plan=plan)
    lacking = without.split(",")
    holding = [str(r) for r in range(tp * pp) if str(r) not in lacking]
    for r in results:
        assert r.returncode == REFUSED, f"rank {r.rank} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-3000:]}"
        line = next(l for l in r.stdout.splitlines() if l.startswith("REFUSED "))
        assert line.startswith(f"REFUSED specplan: rank {r.rank}: ")
        assert (f"no plan on {_named(lacking)} (SPECPLAN_PLAN unset there), a plan on "
                f"{_named(holding)}: a world runs the same plan on every rank, or none") in line


def _named(ranks: list[str]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(ranks)


def test_a_rank_without_specplan_is_named_when_the_plans_timeout_runs_out(tmp_path):
    """A rank that never answers (no specplan there) cannot refuse itself; the plan's ranks
    wait no longer than the plan's runtime.timeout_s and refuse naming it."""
    plan = _plan(tmp_path, "{tp: 2}", timeout_s=5)
    holder, silent = _run(2, "mixed", 2, 1, SPEC, "", "1", plan=plan)
    assert silent.returncode == 0  # vLLM alone there: its executor ends it when the others do
    assert holder.returncode == REFUSED, holder.stdout + holder.stderr[-3000:]
    line = next(l for l in holder.stdout.splitlines() if l.startswith("REFUSED "))
    assert line == ("REFUSED specplan: rank 0: plan 'world': no word within 5 s from rank 1 (no "
                    "specplan plugin loaded there?): a world runs the same plan on every rank, "
                    "or none")


def test_every_rank_with_the_plan_starts(tmp_path):
    """The agreement's other side: the same world, every rank holding the plan, starts."""
    results = _run(2, "mixed", 2, 1, SPEC, "", plan=_plan(tmp_path, "{tp: 2}"))
    assert [_result(r)["tp"] for r in results] == [[[0, 1]], [[0, 1]]]


def test_a_world_without_any_plan_starts_as_vllm(tmp_path):
    results = _run(2, "mixed", 2, 1, SPEC, "", plan=None)
    assert [_result(r)["tp"] for r in results] == [[[0, 1]], [[0, 1]]]


def test_the_plan_reaches_every_ray_worker(tmp_path):
    plan = _plan(tmp_path, "{tp: 2}")
    driver = _result(_run(1, "ray_driver", plan=plan)[0])
    # vLLM's own list leaves the plugin's variables out; the plugin's registration adds them
    assert driver["before"] == []
    assert driver["after"] == sorted(COPIED) and "SPECPLAN_PLAN" in COPIED
    assert driver["extra"] == ",".join(COPIED)
    assert driver["actor"]["SPECPLAN_PLAN"] == str(plan)
    worker = _result(_run(1, "ray_worker", json.dumps(driver["actor"]), plan=None)[0])
    assert worker["driver_env"] == ["SPECPLAN_HOT_PATH", "SPECPLAN_PLAN"]
    assert worker["plan"] == str(plan)
    assert worker["active"] == [str(plan)]
    assert "vllm.distributed.parallel_state.initialize_model_parallel" in worker["hooks"]

