"""Golden plans: tests/golden/plans/<name>.yaml in, <name>.json (plan.json bytes) out.

The matrix (every method x {greedy, sampling} x {plain TP, DP-attention, PP 2, PP 3}) was
written once by tests/golden/plans/make_specs.py; regenerate the plans with
SPECPLAN_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specplan.lower import write_plan
from specplan import compile
from specplan.schema import load_spec

ROOT = Path(__file__).parents[2]
GOLDEN = ROOT / "tests" / "golden" / "plans"
UPDATE = os.environ.get("SPECPLAN_UPDATE_GOLDEN") == "1"
SPECS = sorted(GOLDEN.glob("*.yaml"))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    # plan.json records the spec path as given; load goldens by their repository path.
    monkeypatch.chdir(ROOT)


def compile_bytes(path: Path, out: Path) -> bytes:
    spec = load_spec(path.relative_to(ROOT))
    return write_plan(compile(spec), out).read_bytes()


def test_matrix_is_complete():
    methods = ("none", "eagle-chain", "eagle-tree", "eagle3", "mtp", "standalone", "ngram",
               "dflash", "dspark")
    names = {p.stem for p in SPECS}
    for m in methods:
        for sampling in ("greedy", "sampling"):
            for topo in ("tp2", "dpattn", "pp2", "pp3"):
                assert f"{m}-{sampling}-{topo}" in names


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_plan_matches_golden(path: Path, tmp_path: Path):
    got = compile_bytes(path, tmp_path / "a")
    assert compile_bytes(path, tmp_path / "b") == got, "compile is not deterministic"
    golden = path.with_suffix(".json")
    if UPDATE:
        golden.write_bytes(got)
    assert got == golden.read_bytes(), f"{path.name}: plan differs from {golden.name}"


REORDERED = """\
# The same spec as dspark-greedy-pp2.yaml, keys reordered, comments and a policy line added.
runtime:
  max_batch: 8   # capacity rows
speculative:
  sampling: greedy
  num_steps: 5
  method: dspark
model: {vocab_size: 1024, hidden_size: 256, num_layers: 8}

# a blank line and a comment move every line below
sync:
  policy: safe
topology: {pp: 2, tp: 2}
engine: vllm
name: dspark-greedy-pp2
"""


def test_comments_and_key_order_change_no_hash(tmp_path: Path):
    base = compile(load_spec(GOLDEN / "dspark-greedy-pp2.yaml"))
    moved = tmp_path / "moved.yaml"
    moved.write_text(REORDERED)
    other = compile(load_spec(moved))
    assert other["spec_sha256"] == base["spec_sha256"]
    assert other["fingerprint"] == base["fingerprint"]
    assert other["sites"][0]["line"] == 12  # the line still points at sync.policy


def test_a_real_change_changes_both_hashes(tmp_path: Path):
    base = compile(load_spec(GOLDEN / "dspark-greedy-pp2.yaml"))
    changed = tmp_path / "changed.yaml"
    changed.write_text(REORDERED.replace("max_batch: 8", "max_batch: 16"))
    other = compile(load_spec(changed))
    assert other["spec_sha256"] != base["spec_sha256"]
    assert other["fingerprint"] != base["fingerprint"]
