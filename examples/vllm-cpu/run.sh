#!/usr/bin/env bash
# specplan's plugin inside a real vLLM on a CPU, end to end: the recipe of docs/engines.md
# ("Running inside vLLM"), run as written there. It builds vLLM's CPU environment and a tiny
# model, checks and compiles tiny.yaml, generates with vLLM twice (without the plan, then with
# SPECPLAN_PLAN) and compares the token ids. Exit 0 when they are equal.
#   bash examples/vllm-cpu/run.sh [WORK_DIR]      (2 cores: about 5 to 15 minutes, most of it
#                                                  the engine's start; the first run also builds
#                                                  the environment, about 6 minutes)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"

# 1. vLLM's CPU build (vllm-cpu 0.32.0, torch 2.13.0+cpu) with this checkout installed in it,
#    under ~/.cache/specplan/ (built once per requirements); then the tiny target and its draft.
env=$(bash "$root/tools/vllm_cpu_env.sh")
"$env/bin/python" "$here/tiny_models.py" "$work/models"

# 2. The plan: tiny.yaml states the engine's layout (vLLM 0.32.0, TP 2, the draft model).
"$env/bin/specplan" check "$here/tiny.yaml"
"$env/bin/specplan" compile "$here/tiny.yaml" -o "$work/plan"

# 3. The engine as an operator starts it on a CPU: the V2 model runner (the plugin runs there),
#    1 GiB of KV cache, one core per rank, and site/ on PYTHONPATH so that vLLM's own Triton
#    kernels run in Triton's interpreter (vLLM's CPU build expects triton-cpu).
export VLLM_USE_V2_MODEL_RUNNER=1 VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND='0|1'
export VLLM_WORKER_MULTIPROC_METHOD=fork VLLM_NO_USAGE_STATS=1 HF_HUB_OFFLINE=1
export SPECPLAN_TRITON_CPU=1 PYTHONPATH="$here/site${PYTHONPATH:+:$PYTHONPATH}"
"$env/bin/python" "$here/generate.py" "$work/models" "$work/without-plan.json"
SPECPLAN_PLAN="$work/plan/plan.json" \
  "$env/bin/python" "$here/generate.py" "$work/models" "$work/with-plan.json"

# 4. Greedy: the plan must not change a token.
if cmp -s "$work/without-plan.json" "$work/with-plan.json"; then
  echo "same tokens with and without the plan: $(cat "$work/with-plan.json")"
else
  echo "the tokens differ: without $(cat "$work/without-plan.json"), with $(cat "$work/with-plan.json")"
  exit 1
fi
