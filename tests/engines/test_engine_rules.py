"""Issue 21's engine rules against the engines' own code (SGLang 0.5.23, vLLM 0.33.0 wheels):

- vLLM EAGLE numbers its draft layers from ModelConfig.get_num_layers(parallel_config);
- vLLM refuses EPLB without expert parallel (ParallelConfig._validate_parallel_config);
- SGLang captures taps only inside LlamaModel.forward's layer loop;
- SGLang picks zbal for npu when SGLANG_ZBAL_LOCAL_MEM_SIZE > 0 (_DEVICE_TO_DISTRIBUTED_BACKEND).
- vLLM sizes every worker's KV cache by the smallest worker's reading (get_kv_cache_configs).

Run with `pytest -m engines`.
"""

from __future__ import annotations

import ast
import logging
import sys
import types
from types import SimpleNamespace

import pytest
from real_code import function, source_of

import specplan
from specplan.engines import convention
from specplan.lower import build_plan
from specplan.passes import plan as run_passes
from specplan.schema.load import load_spec
from specplan.schema.model import Spec
from specplan.verify import has_errors, verify
from tests.helpers import cli

pytestmark = pytest.mark.engines


def spec(engine: str, topology: dict, speculative: dict, layers: int = 16, **model) -> Spec:
    return Spec.model_validate({"name": "r", "engine": engine, "behaviour": "engine", "topology": topology,
                                "model": {"num_layers": layers, "hidden_size": 64, "vocab_size": 128, **model},
                                "speculative": speculative})


# -- vLLM EAGLE draft-layer ids ----------------------------------------------------------------

@pytest.fixture(scope="module")
def vllm_num_layers():
    pp_indices = function("vllm", "vllm/distributed/utils.py", "get_pp_indices",
                          {"envs": SimpleNamespace(VLLM_PP_LAYER_PARTITION=None),
                           "logger": logging.getLogger("vllm")})
    utils = types.ModuleType("vllm.distributed.utils")
    utils.get_pp_indices = pp_indices
    with pytest.MonkeyPatch.context() as mp:
        for name in ("vllm", "vllm.distributed"):
            mp.setitem(sys.modules, name, sys.modules.get(name) or types.ModuleType(name))
        mp.setitem(sys.modules, "vllm.distributed.utils", utils)
        ns = {"ParallelConfig": object}
        indices = function("vllm", "vllm/config/model.py", "ModelConfig.get_layers_start_end_indices", ns)
        count = function("vllm", "vllm/config/model.py", "ModelConfig.get_num_layers", ns)

        def num_layers(total: int, tp: int, pp: int) -> int:
            model = SimpleNamespace(get_total_num_hidden_layers=lambda: total)
            model.get_layers_start_end_indices = lambda pc: indices(model, pc)
            last = SimpleNamespace(rank=(pp - 1) * tp, tensor_parallel_size=tp, pipeline_parallel_size=pp)
            return count(model, last)

        yield num_layers


@pytest.mark.parametrize("relpath, cls", [("vllm/model_executor/models/llama_eagle.py", "EagleLlamaForCausalLM"),
                                          ("vllm/model_executor/models/deepseek_eagle.py", "EagleDeepseekV3ForCausalLM")])
def test_vllm_eagle_starts_draft_layers_at_the_stage_count(relpath, cls):
    _, tree = source_of("vllm", relpath)
    init = next(n for c in tree.body if isinstance(c, ast.ClassDef) and c.name == cls
                for n in c.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    text = ast.unparse(init)
    assert "get_num_layers(vllm_config.parallel_config)" in text and "start_layer_id=target_layer_num" in text


@pytest.mark.parametrize("layers, tp, pp", [(16, 1, 1), (16, 1, 2), (16, 2, 2), (61, 1, 4), (7, 1, 3)])
def test_vllm_eagle_draft_layer_ids_are_the_engines(vllm_num_layers, layers, tp, pp):
    s = spec("vllm", {"tp": tp, "pp": pp}, {"method": "eagle", "num_steps": 3}, layers=layers)
    plan = specplan.compile(s)
    engine_first = vllm_num_layers(layers, tp, pp)
    assert plan.pipeline.drafter.layer_ids[0] == engine_first
    assert has_errors(verify(plan)) == (engine_first < layers)  # a target layer's name: ERROR
    eagle3 = specplan.compile(spec("vllm", {"tp": tp, "pp": pp}, {"method": "eagle3", "num_steps": 3},
                                   layers=layers))
    assert eagle3.pipeline.drafter.layer_ids[0] == layers  # get_total_num_hidden_layers


# -- vLLM EPLB needs expert parallel -----------------------------------------------------------

@pytest.fixture(scope="module")
def vllm_validate():
    platform = SimpleNamespace(is_cuda_alike=lambda: True, is_xpu=lambda: False)
    return function("vllm", "vllm/config/parallel.py", "ParallelConfig._validate_parallel_config",
                    {"Self": object, "current_platform": platform, "logger": logging.getLogger("vllm")})


@pytest.mark.parametrize("tp, ep", [(2, 1), (2, 2), (4, 1), (4, 4)])
def test_vllm_eplb_needs_expert_parallel(vllm_validate, tp, ep):
    config = SimpleNamespace(
        _api_process_rank=-1, _api_process_count=1, enable_fault_tolerance=False,
        all2all_backend="allgather_reducescatter", data_parallel_size=1, data_parallel_size_local=1,
        data_parallel_external_lb=False, numa_bind=False, numa_bind_nodes=None, numa_bind_cpus=None,
        enable_eplb=True, enable_expert_parallel=ep > 1, eplb_config=SimpleNamespace(num_redundant_experts=0),
        tensor_parallel_size=tp, prefill_context_parallel_size=1, decode_context_parallel_size=1)
    try:
        vllm_validate(config)
        engine_refuses = False
    except ValueError as exc:
        engine_refuses = "EPLB" in str(exc)
    s = spec("vllm", {"tp": tp, "ep": ep}, {}, moe={"num_experts": 8, "top_k": 2, "eplb": True})
    ours = [v.message for v in convention("vllm").violations(s) if "eplb" in v.path]
    assert engine_refuses == bool(ours)
    assert all("_validate_parallel_config" in m for m in ours)


# -- SGLang taps ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sglang_captured():
    """The layer indices LlamaModel.forward captures, from its own loop and layers_to_capture."""
    _, tree = source_of("sglang", "sglang/srt/models/llama.py")
    model = next(c for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "LlamaModel")
    forward = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    loop = next(n for n in ast.walk(forward) if isinstance(n, ast.For) and "layers_to_capture" in ast.unparse(n))
    bounds = compile(ast.Expression(loop.iter), "llama.py", "eval")
    setter = function("sglang", "sglang/srt/models/llama.py", "LlamaForCausalLM.set_eagle3_layers_to_capture", {})

    def captured(layers: int, taps: list[int]) -> set[int]:
        me = SimpleNamespace(capture_aux_hidden_states=False, model=SimpleNamespace(), config=SimpleNamespace(
            num_hidden_layers=layers), pp_group=SimpleNamespace(is_last_rank=True))
        setter(me, [t - 1 for t in taps])  # checkpoints list tap - 1 (DESIGN.md §6)
        rng = eval(bounds, {"range": range, "self": SimpleNamespace(start_layer=0, end_layer=layers)})  # noqa: S307
        return {i for i in rng if i in me.model.layers_to_capture}

    return captured


@pytest.mark.parametrize("layers, taps", [(32, [2, 16, 29]), (32, [2, 16, 32]), (16, [1, 8, 16]), (16, [0, 15])])
def test_sglang_never_captures_tap_num_layers(sglang_captured, layers, taps):
    produced = sglang_captured(layers, taps)
    s = spec("sglang", {"tp": 1}, {"method": "eagle3", "num_steps": 3, "aux_layers": taps}, layers=layers)
    ours = [v for v in convention("sglang").violations(s) if "aux_layers" in v.path[:2]]
    assert bool(ours) == (produced != set(taps)), (produced, taps)


# -- SGLang zbal on npu ----------------------------------------------------------------------------

def _sglang_backend(device: str, zbal_mb: int) -> str:
    path, tree = source_of("sglang", "sglang/srt/platforms/device_mixin.py")
    assign = next(n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                  and "_DEVICE_TO_DISTRIBUTED_BACKEND" in ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target))
    envs = SimpleNamespace(SGLANG_ZBAL_LOCAL_MEM_SIZE=SimpleNamespace(get=lambda: zbal_mb))
    scope = {"envs": envs}
    exec(compile(ast.Module(body=[assign], type_ignores=[]), str(path), "exec"), scope)  # noqa: S102
    return scope["_DEVICE_TO_DISTRIBUTED_BACKEND"][device]


@pytest.mark.parametrize("zbal_mb", [0, 1024])
def test_sglang_import_plans_the_engines_npu_backend(tmp_path, zbal_mb):
    base = tmp_path / "base.yaml"
    base.write_text("name: b\nengine: sglang\ntopology: {tp: 2}\n"
                    "model: {num_layers: 8, hidden_size: 64, vocab_size: 128}\n")
    res = cli("import", "--engine", "sglang", "--base", str(base), "--",
              f"SGLANG_ZBAL_LOCAL_MEM_SIZE={zbal_mb}", "python", "-m",
              "sglang.launch_server", "--model-path", "m", "--tp-size", "2",
              "--device", "npu")
    assert res.exit_code == 0, res.output
    planned = "zbal" if "backend: zbal" in res.output else "hccl"
    assert planned == _sglang_backend("npu", zbal_mb)


# -- vLLM's start-up agreement: every worker of the engine -------------------------------------

def test_vllm_sizes_every_workers_kv_cache_by_the_smallest_reading_and_the_plan_agrees():
    """EngineCore hands get_kv_cache_configs one available-memory reading per worker of the
    engine (tp x pp x cp of one DP rank) and every worker gets the smallest one's block count:
    so the engine's own plan takes a start-up MIN site over the replica, not over tp."""
    block = 1000

    class Builder:
        def get_kv_cache_config_from_groups(self, config, groups, num_blocks):
            return SimpleNamespace(num_blocks=num_blocks, kv_cache_groups=groups)

    ns = {"_project_kv_cache_groups_to_worker": lambda groups, worker: groups,
          "_pool_bytes_per_block_from_builder": lambda builder, config, groups: block,
          "_check_enough_kv_cache_memory": lambda *a: None, "partial": lambda *a: None,
          "_max_memory_usage_bytes_from_groups": None, "_estimate_max_model_len_from_groups": None,
          "kv_cache_groups_tp_replicas": lambda *a: 1, "logger": logging.getLogger("vllm")}
    builder_module = types.ModuleType("vllm.v1.core.kv_cache_config_builder")
    builder_module.get_kv_cache_config_builder = lambda config: Builder()
    configs = function("vllm", "vllm/v1/core/kv_cache_planning.py", "get_kv_cache_configs", ns)
    config = SimpleNamespace(cache_config=SimpleNamespace(num_gpu_blocks_override=None),
                             model_config=SimpleNamespace(original_max_model_len=4096, max_model_len=4096),
                             parallel_config=SimpleNamespace(tensor_parallel_size=1,
                                                             decode_context_parallel_size=1))
    groups = [SimpleNamespace(layer_names=["layer.0"])]
    readings = [41 * block, 40 * block, 43 * block, 42 * block]  # four workers: tp 1, pp 2, cp 2
    saved = sys.modules.get(builder_module.__name__)
    sys.modules[builder_module.__name__] = builder_module
    try:
        out = configs(config, [{"layer.0": None}] * 4, readings, groups)
    finally:
        if saved is None:
            del sys.modules[builder_module.__name__]
        else:
            sys.modules[builder_module.__name__] = saved
    assert [c.num_blocks for c in out] == [40] * 4

    s = spec("vllm", {"tp": 1, "pp": 2, "cp": 2}, {"method": "dflash", "num_steps": 3})
    p = run_passes(s)
    plan = build_plan(p)
    [site] = [x for x in plan.sites if x.name == "dflash_mem"]
    [family] = [f for f in plan.families if f.name == site.family]
    assert site.family == "replica" and family.group_size == 4
    assert not has_errors(verify(plan))


# -- vLLM: the start-up free-memory reading selects no collective (issue 37) ------------------

VLLM_DFLASH_OFF = """name: vllm-dflash-off
engine: vllm
topology: {tp: 2, dp: 2}
model: {num_layers: 7, hidden_size: 64, vocab_size: 512}
speculative: {method: dflash, num_steps: 3, topk: 1, num_draft_tokens: 4, sampling: greedy,
              draft_num_layers: 2}
sync: {policy: off}
"""


def test_vllm_free_memory_is_the_engines_whatever_the_policy(tmp_path):
    """vLLM 0.33.0's DFlash drafter captures by cudagraph_mode alone (no free-memory reading
    chooses a draft graph) and the EngineCore cuts every worker's KV-cache reading to the
    smallest over the replica (get_kv_cache_configs, run above): with sync.policy off the
    plan keeps dflash_mem agreed by the engine, check finds nothing on it, and simulate,
    whose ranks read different free memory, passes."""
    dflash = source_of("vllm", "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py")[0].read_text()
    assert "mem_get_info" not in dflash and "get_memory_info" not in dflash
    path = tmp_path / "vllm-dflash-off.yaml"
    path.write_text(VLLM_DFLASH_OFF)
    plan = build_plan(run_passes(load_spec(path)))
    [site] = [x for x in plan.sites if x.name == "dflash_mem"]
    assert site.converge and site.family == "replica" and "get_kv_cache_configs" in site.reason
    checked = cli("check", path, "-v")
    assert checked.exit_code == 0 and "dflash_mem" not in checked.output, checked.output
    res = cli("simulate", path, "--rounds", "2", "--requests", "2")
    assert res.exit_code == 0 and "PASS" in res.output, res.output[-2000:]
