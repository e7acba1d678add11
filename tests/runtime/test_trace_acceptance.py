"""Traces stamped with the plan fingerprint, the engine's request ids and accepted lengths; `specplan
diff` refusing traces of two plans and `diff --acceptance` comparing two runs, through the CLI."""

from __future__ import annotations

import json

import specs_rt

from tests.helpers import compile_spec
from tests.ranks import launch
from tests.helpers import cli

FA, FB = "a" * 64, "b" * 64


def _write(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _acc(rank, rnd, request, n, fingerprint=FA, replica=0):
    return {"round": rnd, "request": request, "site": "acceptance", "decision": "accepted_len",
            "hash": n, "value": [n], "seq_len": None, "positions": None, "accepted": n,
            "rank": rank, "replica": replica, "fingerprint": fingerprint}


def _run(tmp, name, lens, fingerprint=FA):
    """Two ranks of one replica recording the same lengths: lens[round][request]."""
    for rank in (0, 1):
        _write(tmp / name / f"rank{rank}.jsonl",
               [_acc(rank, r, f"q{i}", n, fingerprint) for r, row in enumerate(lens, 1) for i, n in enumerate(row)])
    return tmp / name


def test_diff_refuses_traces_written_under_two_plans(tmp_path):
    _write(tmp_path / "rank0.jsonl", [_acc(0, 1, "q0", 3, FA)])
    _write(tmp_path / "rank1.jsonl", [_acc(1, 1, "q0", 3, FB)])
    out = cli("diff", tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "traces of two plans" in out.stderr
    for name, fp in (("rank0.jsonl", FA), ("rank1.jsonl", FB)):  # both files, both plans named
        assert str(tmp_path / name) in out.stderr and fp[:16] in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_acceptance_drop_beyond_the_threshold_exits_3_printing_both_means(tmp_path):
    a = _run(tmp_path, "pp1", [[4, 3], [4, 1]])  # mean 3.0
    b = _run(tmp_path, "pp2", [[3, 3], [3, 2]], FB)  # mean 2.75: 8.33% short, another plan
    out = cli("diff", "--acceptance", a, b)
    assert out.returncode == 3, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (f"A {a}: mean accepted length 3.0000 per request per round "
                        f"(4 request-rounds, 2 rounds, plan {FA[:16]})")
    assert lines[1].startswith(f"B {b}: mean accepted length 2.7500 per request per round")
    assert lines[2] == "acceptance drop: B falls short of A by 8.33% (threshold 5%)"
    looser = cli("diff", "--acceptance", a, b, "--threshold", "10")
    assert looser.returncode == 0, looser.stdout + looser.stderr
    assert looser.stdout.splitlines()[2] == "acceptance holds: B is within 10% of A (-8.33%)"
    reverse = cli("diff", "--acceptance", b, a)  # B above A never fails
    assert reverse.returncode == 0 and "(+9.09%)" in reverse.stdout


def test_acceptance_refuses_bad_runs(tmp_path):
    a = _run(tmp_path, "a", [[3]])
    out = cli("diff", "--acceptance", a)
    assert out.returncode == 2 and "takes two runs, RUN_A RUN_B (their trace dirs); given 1" in out.stderr
    _write(tmp_path / "empty" / "rank0.jsonl", [{**_acc(0, 1, "q", 1), "decision": "draft_tokens"}])
    out = cli("diff", "--acceptance", a, tmp_path / "empty")
    assert out.returncode == 2 and out.stderr.startswith(f"{tmp_path / 'empty'}: no accepted-length records")
    _write(tmp_path / "mixed" / "rank0.jsonl", [_acc(0, 1, "q", 1, FA)])
    _write(tmp_path / "mixed" / "rank1.jsonl", [_acc(1, 1, "q", 1, FB)])
    out = cli("diff", "--acceptance", a, tmp_path / "mixed")
    assert out.returncode == 2 and "written under plan fingerprint" in out.stderr


def _records(trace):
    return {int(p.stem[4:]): [json.loads(l) for l in p.read_text().splitlines()]
            for p in sorted(trace.glob("rank*.jsonl"))}


def test_real_runs_trace_request_ids_acceptance_and_fingerprint(tmp_path):
    plan = compile_spec(tmp_path / "plan", specs_rt.TP2_DSPARK)
    other = compile_spec(tmp_path / "other", specs_rt.TP2_DSPARK.replace("max_batch: 8", "max_batch: 4"))
    fp = json.loads(plan.read_text())["fingerprint"]
    runs = {"a": (plan, "accept"), "b": (plan, "record:0.5"), "c": (other, "record:1")}
    for name, (path, mode) in runs.items():
        results = launch(2, "traced", path, 3, mode, module="device_workers",
                         env={"SPECPLAN_TRACE_DIR": str(tmp_path / name)})
        assert all(r.returncode == 0 for r in results), [r.stdout + r.stderr for r in results]
    recs = _records(tmp_path / "a")
    assert {r["fingerprint"] for rs in recs.values() for r in rs} == {fp}
    accepted = [r for r in recs[0] if r["decision"] == "accepted_len"]
    assert [r["request"] for r in accepted[:4]] == [f"rid-{i}-rt-tp2-dspark" for i in range(4)]
    assert [r["accepted"] for r in accepted[:4]] == [2, 3, 4, 1]  # round 1: (i + 1) % 4 drafts + bonus
    same = cli("diff", tmp_path / "a")
    assert same.returncode == 0 and same.stdout.startswith("no divergence: 2 ranks")
    drop = cli("diff", "--acceptance", tmp_path / "a", tmp_path / "b")
    assert drop.returncode == 3, drop.stdout + drop.stderr
    assert "mean accepted length 2.5000" in drop.stdout and "mean accepted length 1.2500" in drop.stdout
    two_plans = cli("diff", tmp_path / "a" / "rank0.jsonl", tmp_path / "c" / "rank1.jsonl")
    assert two_plans.returncode == 2 and fp[:16] in two_plans.stderr
