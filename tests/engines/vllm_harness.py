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


# Versions the stubbed packages report to importlib.metadata: vLLM 0.30 / 0.31 refuse at
# import a transformers older than 5 (transformers_utils/config.py asks its metadata).
STUB_VERSIONS = {"transformers": "5.0.0"}


def install(root) -> None:
    """Put the unpacked wheel first on sys.path and install the stubs (idempotent)."""
    if any(isinstance(f, _StubFinder) for f in sys.meta_path):
        return
    sys.path.insert(0, str(root))
    stubbed = _missing(STUBBED)
    sys.meta_path.insert(0, _StubFinder(stubbed))
    sys.meta_path.append(_StubMetadata({n: v for n, v in STUB_VERSIONS.items() if n in stubbed}))


class _StubMetadata:
    """A meta-path finder that only answers importlib.metadata for the stubbed packages."""

    def __init__(self, versions: dict[str, str]):
        self.versions = versions

    def find_spec(self, name, path, target=None):
        return None

    def find_distributions(self, context=None):
        name = getattr(context, "name", None)
        for dist, version in self.versions.items():
            if name in (None, dist):
                yield _Dist(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")


def _dist_class():
    import importlib.metadata as md

    class Dist(md.Distribution):
        def __init__(self, metadata: str):
            self._metadata = metadata

        def read_text(self, filename):
            return self._metadata if filename in ("METADATA", "PKG-INFO") else None

        def locate_file(self, path):
            return path

    return Dist


_Dist = _dist_class()


def _missing(names) -> list[str]:
    """Only what this environment lacks: an installed real package is used as is."""
    import importlib.util

    return [n for n in names if importlib.util.find_spec(n) is None]


def start_engine(tp: int, pp: int, dp: int = 1, speculative: dict | None = None, **parallel):
    """What a vLLM worker does first: plugins, its config, the world, the model-parallel groups.

    Returns parallel_state. `speculative` holds SpeculativeConfig field values (method,
    num_speculative_tokens); without a model there is no draft/target model config. `parallel`:
    further ParallelConfig fields (enable_batch_sharded_sampling=True).
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
        data_parallel_master_port=port, distributed_executor_backend="mp", **parallel))
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


# What the rank programs import first, and what vLLM reads from the environment on the way
# (CUDA_VISIBLE_DEVICES empty: vLLM keeps Triton without an active driver; the V2 runner).
WARM = ("vllm.config", "vllm.plugins", "vllm.distributed.parallel_state", "vllm.v1.outputs",
        "vllm.v1.worker.gpu.pp_utils", "vllm.v1.worker.gpu.spec_decode.rejection_sampler",
        "vllm.v1.worker.gpu.sample.states", "vllm.v1.worker.gpu.async_utils")
WARM_ENV = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "VLLM_USE_V2_MODEL_RUNNER": "1"}


def forkserver(root) -> tuple:
    """launch()'s `preload` for ranks running vLLM's code from the wheel at `root`."""
    return ("torch", "triton", ("tests.ranks:warm", "vllm_harness", str(root)))
