"""Start-up for vLLM's CPU build with the stock Triton (put this folder on PYTHONPATH; run.sh and
the real-engine lane do; never installed with the package).

vLLM's CPU build enables Triton only when Triton has a backend named `cpu` (triton-cpu); the
environment's Triton (tools/vllm_cpu_env.sh) is the stock one. Registering its backend under that name, with TRITON_INTERPRET=1,
lets vLLM's V2 model runner run its own Triton kernels in Triton's interpreter on the CPU.
vLLM's files are never edited. Runs in every process vLLM starts (API server, engine core,
workers), as Python imports sitecustomize at start-up.
"""

import os

# SPECPLAN_TEST_TRITON_CPU: the name the real-engine lane sets (tests/real_engine/lane.py)
if "1" in (os.environ.get("SPECPLAN_TRITON_CPU"), os.environ.get("SPECPLAN_TEST_TRITON_CPU")):
    os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        from triton.backends import backends
    except ImportError:  # no Triton: vLLM then says so itself
        backends = {}
    if backends and "cpu" not in backends:
        backends["cpu"] = next(iter(backends.values()))
