"""specplan diff over hand-written traces: joins by replica and request, never imports torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import ROOT, UNWRAPPED


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _rec(rank, replica, rnd, request, h, seq=None):
    return {"round": rnd, "request": request, "site": "s", "decision": "d", "hash": h,
            "value": [h], "seq_len": seq, "positions": None, "rank": rank, "replica": replica}


def _diff(*paths):
    code = ("import sys; from specplan.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
            "    assert 'torch' not in sys.modules, 'diff imported torch'\n    raise")
    # unwrapped: the report's lines as written (tests/cli/test_width.py checks them at 80 columns)
    env = {**os.environ, "COLUMNS": UNWRAPPED}
    return subprocess.run([sys.executable, "-c", code, "diff", *map(str, paths)],
                          capture_output=True, text=True, cwd=ROOT, env=env)


def test_diff_ignores_other_replicas_and_names_the_first_divergence(tmp_path):
    _write(tmp_path / "rank0.jsonl", [_rec(0, 0, 1, "a", 1), _rec(0, 0, 2, "a", 5, 12), _rec(0, 0, 2, "b", 6)])
    _write(tmp_path / "rank1.jsonl", [_rec(1, 0, 1, "a", 1), _rec(1, 0, 2, "a", 5, 13), _rec(1, 0, 2, "b", 7)])
    _write(tmp_path / "rank2.jsonl", [_rec(2, 1, 1, "a", 99)])  # another replica: never compared
    out = _diff(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.splitlines()[0] == ("first divergence: round 2, site s, decision d, replica 0, "
                                          "requests ['a', 'b']")
    assert "ranks [0]: request 'a'" in out.stdout and "seq_len 12" in out.stdout and "seq_len 13" in out.stdout


def test_diff_exits_0_when_ranks_agree(tmp_path):
    _write(tmp_path / "rank0.jsonl", [_rec(0, 0, 1, "a", 1)])
    _write(tmp_path / "rank1.jsonl", [_rec(1, 0, 1, "a", 1)])
    out = _diff(tmp_path / "rank0.jsonl", tmp_path / "rank1.jsonl")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "no divergence: 2 ranks, 2 records"
