"""Test-only start-up for the real-engine lane (on PYTHONPATH of the lane's runs, never installed).

vLLM's CPU build enables Triton only when Triton has a backend named `cpu` (triton-cpu); the
lane's Triton is the stock one. Registering its backend under that name, with TRITON_INTERPRET=1,
lets vLLM's V2 model runner run its own Triton kernels in Triton's interpreter on the CPU.
vLLM's files are never edited. Runs in every process vLLM starts (API server, engine core,
workers), as Python imports sitecustomize at start-up.
"""

import os

if os.environ.get("SPECPLAN_TEST_TRITON_CPU") == "1":
    os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        from triton.backends import backends
    except ImportError:  # no Triton: vLLM then says so itself
        backends = {}
    if backends and "cpu" not in backends:
        backends["cpu"] = next(iter(backends.values()))
