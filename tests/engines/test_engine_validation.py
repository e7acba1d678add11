"""The engines' own validation on the table of topologies.py: specplan agrees with it.

Each of specplan's refusal messages cites the engine function that refuses; for the ones
run here the engine's function (compiled from the unpacked wheel, real_code.py) must refuse
exactly the topologies whose specplan refusals cite it, and the DCP groups it builds must
equal specplan's dcp family. Run with `pytest -m engines`.
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from real_code import function, sglang_cp_hook, statements
from topologies import CASES, SGLANG, VLLM, Case

from specplan.engines import convention
from specplan.engines import build_mesh
from specplan.schema.model import Spec

pytestmark = pytest.mark.engines


def cited(case: Case, name: str) -> bool:
    """Whether specplan refuses the case with a message citing engine function `name`."""
    spec = Spec.model_validate(case.spec())
    return any(name in v.message for v in convention(case.engine).violations(spec))


def _refuses(call) -> bool:
    try:
        call()
    except (AssertionError, ValueError, RuntimeError):
        return True
    return False


def agrees(case: Case, function: str, call) -> bool:
    """The engine's `function` (run by `call`) refuses the case exactly when specplan cites it;
    whether it refused."""
    refused = _refuses(call)
    assert refused == cited(case, function), case
    return refused


# -- vLLM 0.33.0 ParallelConfig._validate_parallel_config -----------------------------------

@pytest.fixture(scope="module")
def vllm_validate():
    platform = SimpleNamespace(is_cuda_alike=lambda: True, is_xpu=lambda: False)
    return function("vllm", "vllm/config/parallel.py", "ParallelConfig._validate_parallel_config",
                    {"Self": object, "current_platform": platform, "logger": logging.getLogger("vllm")})


def vllm_config(t: dict) -> SimpleNamespace:
    return SimpleNamespace(
        _api_process_rank=-1, _api_process_count=1, enable_fault_tolerance=False,
        all2all_backend="allgather_reducescatter", data_parallel_size=t.get("dp", 1),
        data_parallel_size_local=t.get("dp", 1), data_parallel_external_lb=False, numa_bind=False,
        numa_bind_nodes=None, numa_bind_cpus=None, enable_eplb=False,
        eplb_config=SimpleNamespace(num_redundant_experts=0), tensor_parallel_size=t["tp"],
        prefill_context_parallel_size=t.get("cp", 1), decode_context_parallel_size=t.get("dcp", 1))


@pytest.mark.parametrize("case", VLLM, ids=lambda c: c.id)
def test_vllm_parallel_config_agrees(vllm_validate, case: Case):
    agrees(case, "_validate_parallel_config", lambda: vllm_validate(vllm_config(case.topology)))


@pytest.fixture(scope="module")
def vllm_dcp_groups():
    import torch

    keep = lambda s: s.startswith("all_ranks = torch.arange") or "dcp" in s  # noqa: E731
    return torch, statements("vllm", "vllm/distributed/parallel_state.py",
                             "initialize_model_parallel", keep)


@pytest.mark.parametrize("case", [c for c in VLLM if c.refused_at is None and c.topology.get("dcp", 1) > 1],
                         ids=lambda c: c.id)
def test_vllm_dcp_groups_are_the_engines(vllm_dcp_groups, case: Case):
    torch, run = vllm_dcp_groups
    t, made = case.topology, []
    mesh = build_mesh(Spec.model_validate(case.spec()))
    run({"torch": torch, "world_size": mesh.world_size, "data_parallel_size": t.get("dp", 1),
         "pipeline_model_parallel_size": t.get("pp", 1), "prefill_context_model_parallel_size": t.get("cp", 1),
         "tensor_model_parallel_size": t["tp"], "decode_context_model_parallel_size": t["dcp"],
         "enable_elastic_ep": False, "local_all_ranks": None, "backend": "gloo",
         "get_world_group": lambda: SimpleNamespace(local_rank=0),
         "init_model_parallel_group": lambda ranks, *a, **k: made.append([list(r) for r in ranks])})
    assert made == [mesh.family("dcp").groups()]


# -- SGLang 0.5.23 handle_context_parallelism, initialize_model_parallel ---------------------

@pytest.fixture(scope="module")
def sglang_context(monkeypatch_module):
    return sglang_cp_hook(monkeypatch_module.setitem)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def sglang_args(t: dict) -> SimpleNamespace:
    return SimpleNamespace(
        model_path="instance://x", enable_prefill_cp=False, cp_strategy=None, tp_size=t["tp"],
        attn_cp_size=t.get("cp", 1), attn_dp_size=t.get("dp", 1) if t.get("dp_attention") else 1,
        moe_dp_size=t.get("moe_dp", 1), ep_size=t.get("ep", 1), pp_size=t.get("pp", 1),
        enable_aiter_allreduce_fusion=False,
        # the releases before --attn-dp-size read DP-attention as dp_size + the flag
        dp_size=t.get("dp", 1), enable_dp_attention=bool(t.get("dp_attention")))


@pytest.mark.parametrize("case", SGLANG, ids=lambda c: c.id)
def test_sglang_context_parallelism_agrees(sglang_context, case: Case):
    agrees(case, "handle_context_parallelism", lambda: sglang_context(sglang_args(case.topology)))


@pytest.fixture(scope="module")
def sglang_dcp():
    keep = lambda s: s.startswith("if") and "decode_context_parallel_size" in s.split("\n")[0]  # noqa: E731
    return statements("sglang", "sglang/srt/distributed/parallel_state.py", "initialize_model_parallel", keep)


@pytest.mark.parametrize("case", SGLANG, ids=lambda c: c.id)
def test_sglang_dcp_groups_are_the_engines(sglang_dcp, case: Case):
    t, made = case.topology, []
    tp, dcp = t["tp"], t.get("dcp", 1)
    world = tp * t.get("pp", 1)
    scope = {"tensor_model_parallel_size": tp, "decode_context_parallel_size": dcp,
             "group_ranks": [list(range(s, s + tp)) for s in range(0, world, tp)],
             "is_hip": lambda: False, "is_cuda": lambda: True, "_is_npu": False, "_is_xpu": False,
             "init_model_parallel_group": lambda ranks, *a, **k: made.append(ranks) or "dcp",
             "get_world_group": lambda: SimpleNamespace(local_rank=0), "backend": "gloo",
             "envs": SimpleNamespace(SGLANG_USE_MESSAGE_QUEUE_BROADCASTER=SimpleNamespace(get=bool)),
             "recovered_rank": False, "rank_offset": 0, "max_world_size": None,
             "_TP": SimpleNamespace(rank_in_group=1), "logger": logging.getLogger("sglang"),
             "get_tensor_model_parallel_rank": lambda: 1}  # SGLang 0.5.20 reads it
    refused = agrees(case, "initialize_model_parallel", lambda: sglang_dcp(scope))
    if refused or dcp == 1 or case.refused_at is not None:
        return
    assert made == [build_mesh(Spec.model_validate(case.spec())).family("dcp").groups()]


def test_every_case_is_judged():
    assert {c.engine for c in CASES} == {"sglang", "vllm"} and len(CASES) >= 30
