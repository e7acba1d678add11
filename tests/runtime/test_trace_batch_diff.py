"""specplan diff names a batch disagreement (ranks of one replica hold another (request,
generation) in one row) as such, not as the value divergence it causes; torch-free."""

from __future__ import annotations

from test_trace_diff import _diff, _write


def _rec(rank, rnd, row, request, gen, h, replica=0):
    return {"round": rnd, "row": row, "request": request, "generation": gen, "site": "s",
            "decision": "d", "hash": h, "value": [h], "seq_len": None, "positions": None,
            "rank": rank, "replica": replica}


def test_diff_reports_a_batch_disagreement_rather_than_a_value_divergence(tmp_path):
    same = [_rec(None, 1, 0, 16, 0, 5), _rec(None, 1, 1, 17, 1, 6)]
    for rank in range(4):
        rows = [dict(r, rank=rank) for r in same]
        gen = 2 if rank == 3 else 1  # rank 3's row 1 was reused: generation 2
        rows += [_rec(rank, 2, 0, 16, 0, 7), _rec(rank, 2, 1, 17, gen, 8 if rank == 3 else 9)]
        _write(tmp_path / f"rank{rank}.jsonl", rows)
    _write(tmp_path / "rank4.jsonl", [_rec(4, 2, 1, 40, 7, 1, replica=1)])  # another replica
    out = _diff(tmp_path)
    assert out.returncode == 3, out.stdout + out.stderr
    assert out.stdout.splitlines() == [
        "batch disagreement: round 2, site s, decision d, replica 0, row 1: rank 3 holds request 17 "
        "gen 2 where rank 0 holds request 17 gen 1",
        "  the ranks disagree on which request the row is, so its values are not compared"]


def test_an_earlier_value_divergence_is_still_reported_first(tmp_path):
    _write(tmp_path / "rank0.jsonl", [_rec(0, 1, 0, 16, 0, 5), _rec(0, 2, 0, 16, 0, 5)])
    _write(tmp_path / "rank1.jsonl", [_rec(1, 1, 0, 16, 0, 6), _rec(1, 2, 0, 16, 1, 5)])
    out = _diff(tmp_path)
    assert out.returncode == 3
    assert out.stdout.startswith("first divergence: round 1, site s, decision d, replica 0, requests [16]")


def test_traces_with_rows_that_agree_have_no_divergence(tmp_path):
    _write(tmp_path / "rank0.jsonl", [_rec(0, 1, 0, "a", 0, 5)])
    _write(tmp_path / "rank1.jsonl", [_rec(1, 1, 0, "a", 0, 5)])
    out = _diff(tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "no divergence: 2 ranks, 2 records"
