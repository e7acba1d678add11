"""Import vLLM 0.33.0's real modules on a CPU: the wheel on sys.path, plus the fewest stubs.

The placeholder machinery is sglang_harness's (one home). Stubbed are only packages that
need a GPU, the network or a heavy install, and that the code under test
(parallel_state.initialize_model_parallel, plugins.load_general_plugins, the V2
RejectionSampler and its Triton kernels, pp_utils) never calls: vllm.config, the V2 sampler
and their imports pull them in at import (server, tokenizer, multimodal, structured output,
metrics). regex and pyzmq are real (the `dev` extra): TP's message-queue broadcaster runs
its shared-memory handshake over local zmq sockets when the groups are built.
"""

from __future__ import annotations

import sys

from sglang_harness import _StubFinder

STUBBED = (
    # network / server
    "urllib3", "requests", "aiohttp", "fastapi", "openai", "openai_harmony", "uvloop",
    "prometheus_client",
    # heavy model tooling (configs, weights, tokenizers, images, grammars)
    "transformers", "huggingface_hub", "safetensors", "PIL", "xgrammar", "llguidance",
    "partial_json_parser", "tqdm", "einops",
    # process and serialisation niceties vLLM imports at module level
    "psutil", "cpuinfo", "cbor2", "cachetools", "cloudpickle", "pybase64",
)


def install(root) -> None:
    """Put the unpacked wheel first on sys.path and install the stubs (idempotent)."""
    if any(isinstance(f, _StubFinder) for f in sys.meta_path):
        return
    sys.path.insert(0, str(root))
    sys.meta_path.insert(0, _StubFinder(_missing(STUBBED)))


def _missing(names) -> list[str]:
    """Only what this environment lacks: an installed real package is used as is."""
    import importlib.util

    return [n for n in names if importlib.util.find_spec(n) is None]


def start_engine(tp: int, pp: int, dp: int = 1, speculative: dict | None = None):
    """What a vLLM worker does first: plugins, its config, the world, the model-parallel groups.

    Returns parallel_state. `speculative` holds SpeculativeConfig field values (method,
    num_speculative_tokens); without a model there is no draft/target model config.
    """
    import os
    import types

    from vllm.config import DeviceConfig, ParallelConfig, VllmConfig, set_current_vllm_config
    from vllm.plugins import load_general_plugins
    import vllm.distributed.parallel_state as ps

    load_general_plugins()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    per_engine = world // dp  # vLLM starts one engine per DP rank, each of tp x pp workers
    port = int(os.environ["MASTER_PORT"])
    config = VllmConfig(device_config=DeviceConfig(device="cpu"), parallel_config=ParallelConfig(
        tensor_parallel_size=tp, pipeline_parallel_size=pp, data_parallel_size=dp,
        data_parallel_rank=rank // per_engine, data_parallel_master_ip="127.0.0.1",
        data_parallel_master_port=port, distributed_executor_backend="mp"))
    config.scheduler_config.max_num_seqs = 8  # the plans' runtime.max_batch
    # vLLM's launcher builds one config and ships it to every worker; built per rank here, the
    # DP master port must be the one every rank was given, not each process's own free port.
    config.parallel_config._data_parallel_master_port_list = []
    config.parallel_config.data_parallel_master_port = port
    if speculative is not None:
        config.speculative_config = types.SimpleNamespace(
            target_model_config=None, draft_model_config=None, **speculative)
    with set_current_vllm_config(config):
        # With dp > 1 vLLM itself offsets the rank by the DP rank and joins the DP master.
        ps.init_distributed_environment(
            world_size=per_engine, rank=rank % per_engine, local_rank=rank, backend="gloo",
            distributed_init_method=f"tcp://127.0.0.1:{port}")
        ps.initialize_model_parallel(tp, pp)
    return ps
