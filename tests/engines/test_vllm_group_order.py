"""vLLM 0.33.0's initialize_model_parallel, run from its wheel: the groups it creates, in its
order, are the plan's families (issue 37): the `eplb` group of the EP group's ranks with
--enable-eplb (a process group of its own), and the one-rank dcp groups in rank order when
dcp = 1, pcp > 1. Only the group-making statements run (Engram's aside); torch ranks them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from real_code import statements

from specplan.engines import build_mesh
from specplan.schema.model import Spec

pytestmark = pytest.mark.engines
# From `all_ranks = ...` on: every statement but the log line (Engram's groups are off without
# an engram_config: ETP reuses TP, no EDP).
@pytest.fixture(scope="module")
def make_groups():
    import torch

    started = [False]

    def keep(src: str) -> bool:
        started[0] = started[0] or src.startswith("all_ranks")
        return started[0] and not src.startswith("logger")

    return torch, statements("vllm", "vllm/distributed/parallel_state.py", "initialize_model_parallel", keep)


CASES = [({"tp": 2, "dp": 2, "ep": 4}, True), ({"tp": 2, "cp": 2}, False), ({"tp": 2, "cp": 2, "dp": 2}, False),
         ({"tp": 2, "cp": 2, "dcp": 2}, False), ({"tp": 1, "cp": 4}, False), ({"tp": 2, "pp": 2, "dp": 2, "ep": 4}, True)]


@pytest.mark.parametrize("t, moe", CASES, ids=lambda c: str(c))
def test_the_engines_groups_in_its_order(make_groups, t, moe):
    torch, run = make_groups
    model = {"num_layers": 8, "hidden_size": 64, "vocab_size": 512}
    if moe:
        model["moe"] = {"num_experts": 8, "top_k": 2, "eplb": True}
    mesh = build_mesh(Spec.model_validate({"name": "g", "engine": "vllm", "topology": t, "model": model}))
    made: list[tuple[str, list]] = []
    config = SimpleNamespace(model_config=SimpleNamespace(is_moe=moe, architecture="x"), engram_config=None,
                             parallel_config=SimpleNamespace(enable_eplb=moe, use_all2all=False))
    scope = {"torch": torch, "world_size": mesh.world_size, "data_parallel_size": t.get("dp", 1),
             "pipeline_model_parallel_size": t.get("pp", 1),
             "prefill_context_model_parallel_size": t.get("cp", 1),
             "tensor_model_parallel_size": t["tp"], "decode_context_model_parallel_size": t.get("dcp", 1),
             "enable_elastic_ep": False, "local_all_ranks": None, "backend": "gloo", "config": config,
             "parallel_config": config.parallel_config,
             "get_world_group": lambda: SimpleNamespace(local_rank=0),
             "init_model_parallel_group": lambda ranks, *a, group_name, **k: made.append(
                 (group_name, [list(r) for r in ranks]))}
    for name in ("_TP", "_ETP", "_ENGRAM_DP", "_DCP", "_PCP", "_PP", "_DP", "_EP", "_EPLB"):
        scope[name] = None
    run(scope)
    ours = [(f.name, f.groups()) for f in mesh.families if f.name != "replica" and f.alias is None]
    assert made == ours
    if moe:
        assert [n for n, _ in made][-2:] == ["ep", "eplb"]
