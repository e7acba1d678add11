#!/usr/bin/env bash
# The package as users get it (issue 38 item 7): build the wheel and the sdist, install the wheel
# into a fresh venv (no checkout on its path), and run what a new user runs first: --version,
# `check` on an example spec the sdist carries, `schema`, and both engines' plugin entry points.
# Usage: tools/wheel_check.sh PYTHON (the dev venv's python, which has `build`); about 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-.venv/bin/python}
work=$(mktemp -d)
trap 'rm -rf "$work" specplan.egg-info' EXIT
# isolated (the default): setuptools comes from the index, as for a user's `pip install .`,
# whether or not the dev venv has it (Python 3.12+ venvs do not)
"$python" -m build --sdist --wheel --outdir "$work/dist" . >"$work/build.log" 2>&1 \
  || { cat "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/specplan-*.whl)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$wheel"
tar xzf "$work"/dist/specplan-*.tar.gz -C "$work"
sdist=$(ls -d "$work"/specplan-*/)
cd "$work"  # nothing of the checkout on the path: the installed wheel answers
venv="$work/venv/bin"
"$venv/specplan" --version
"$venv/specplan" check "$sdist/specs/llama-3.2-1b-eagle3-pp2.yaml"
"$venv/specplan" schema | "$venv/python" -c 'import json, sys; assert json.load(sys.stdin)["properties"]'
"$venv/python" - <<'PY'
from importlib.metadata import entry_points

for group in ("sglang.srt.plugins", "vllm.general_plugins"):
    (ep,) = [e for e in entry_points(group=group) if e.name == "specplan"]
    assert callable(ep.load()), ep
    print(f"{group}: {ep.value} loads")
PY
cd - >/dev/null
SPECPLAN_WHEEL="$wheel" "$python" -m pytest -q -p no:cacheprovider tests/test_package_data.py
