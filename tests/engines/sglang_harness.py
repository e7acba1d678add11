"""Import SGLang 0.5.23's real modules on a CPU: the wheel on sys.path, plus the fewest stubs.

Stubbed (each a module whose every attribute is a permissive placeholder class) are only
packages that need a GPU, the network or a heavy install, and that the code under test
(parallel_state, plugins, spec_tp_sync, dspark_verify's accept) never calls: they are
imported by modules along the way (server, tokenizer, multimodal, config registries).
Light pure-Python dependencies that run at import (msgspec structs, dill, regex) are real,
from the `dev` extra. `transformers` is stubbed only after `sglang` itself is imported: with
it absent, sglang's transformers patches are skipped (their documented no-op), and the config
modules imported later only register classes with it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

STUBBED = (
    # network / server
    "requests", "aiohttp", "starlette", "fastapi", "uvicorn", "zmq", "openai",
    # GPU / native kernels
    "tvm_ffi", "torchvision",
    # heavy model tooling (tokenizers, configs, weights)
    "huggingface_hub", "sentencepiece", "safetensors", "compressed_tensors", "gguf", "einops",
    "partial_json_parser", "PIL", "xgrammar",  # xgrammar: SGLang 0.5.20 imports it at start
    # process and console niceties
    "orjson", "pybase64", "psutil", "setproctitle", "tqdm", "IPython",
)
LATE = ("transformers",)


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (Placeholder,), {})

    def __getitem__(cls, key):
        return cls

    def __setitem__(cls, key, value):
        pass

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return type.__call__(cls, *args, **kwargs)


class Placeholder(metaclass=_Meta):
    """Stands for any class or function of a stubbed package: subclassable, callable."""

    def __init__(self, *args, **kwargs):
        pass

    def __init_subclass__(cls, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        return Placeholder()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (Placeholder,), {})

    def __iter__(self):
        return iter(())

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Meta(name, (Placeholder,), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _StubModule(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def install(root) -> None:
    """Put the unpacked wheel first on sys.path and install the stubs (idempotent)."""
    if any(isinstance(f, _StubFinder) for f in sys.meta_path):
        return
    sys.path.insert(0, str(root))
    finder = _StubFinder(STUBBED)
    sys.meta_path.insert(0, finder)
    import sglang  # noqa: F401  (transformers absent: its patches are skipped)

    finder.names.update(LATE)


# What the rank programs import first, and what SGLang reads from the environment when they are
# imported (module-level torch.compile decorators: run them eagerly; Triton's interpreter).
WARM = ("sglang.srt.distributed.parallel_state", "sglang.srt.plugins.hook_registry",
        "sglang.srt.speculative.eagle_worker_v2", "sglang.srt.managers.scheduler_pp_mixin",
        "sglang.srt.managers.scheduler_components.batch_result_processor")
WARM_ENV = {"TRITON_INTERPRET": "1", "TORCHDYNAMO_DISABLE": "1"}


def forkserver(root) -> tuple:
    """launch()'s `preload` for ranks running SGLang's code from the wheel at `root`."""
    return ("torch", "triton", ("tests.ranks:warm", "sglang_harness", str(root)))
