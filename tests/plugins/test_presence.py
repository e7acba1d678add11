"""The start-up agreement (plugins/presence.py): every rank holds the same plan, or none does,
on a real c10d store (torch's HashStore, one thread per rank); and the variables the vLLM
plugin copies to Ray workers are every SPECPLAN_ variable specplan reads
(plugins/vllm_world.py; against vLLM's real Ray code: tests/engines/test_vllm_world.py)."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest
import torch.distributed as dist

from specplan.plugins.common import EngineRefused
from specplan.plugins.presence import agree, refusal
from specplan.plugins.vllm_world import COPIED, RAY_EXTRA, copy_to_ray

ROOT = Path(__file__).resolve().parents[2]


def _world(held: list[str | None], timeout_s: float = 5.0, silent: tuple[int, ...] = ()):
    """Each rank's outcome: None (starts) or its refusal."""
    store, out = dist.HashStore(), {}

    def rank(r):
        try:
            agree(held[r], "p" if held[r] else None, r, len(held), timeout_s, store=store)
            out[r] = None
        except EngineRefused as exc:
            out[r] = str(exc)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(held))
               if r not in silent]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_every_rank_with_the_plan_or_none_starts():
    assert _world(["f" * 64] * 3) == {0: None, 1: None, 2: None}
    assert _world([None] * 3) == {0: None, 1: None, 2: None}


def test_a_rank_without_the_plan_is_refused_on_every_rank():
    out = _world(["a" * 64, None, "a" * 64, None])
    for r, line in out.items():
        assert line == (f"specplan: rank {r}: " + ("plan 'p': " if r in (0, 2) else "")
                        + "no plan on ranks 1, 3 (SPECPLAN_PLAN unset there), a plan on ranks "
                        "0, 2: a world runs the same plan on every rank, or none")


def test_different_plans_are_refused_naming_each_fingerprint():
    out = _world(["a" * 64, "b" * 64])
    assert all("different plans: fingerprint aaaaaaaaaaaaaaaa on rank 0, fingerprint "
               "bbbbbbbbbbbbbbbb on rank 1" in line for line in out.values())


def test_a_rank_that_never_answers_is_named_when_the_bound_runs_out():
    out = _world(["a" * 64, "a" * 64, None], timeout_s=0.5, silent=(2,))
    assert set(out) == {0, 1}
    assert all("no word within 0.5 s from rank 2 (no specplan plugin loaded there?)" in line
               for line in out.values())


def test_without_any_plan_a_silent_rank_is_not_specplans_business():
    assert _world([None, None], timeout_s=0.2, silent=(1,)) == {0: None}
    assert refusal({0: "-"}, 2, None, 1.0) is None


def test_the_ray_copy_list_holds_every_variable_specplan_reads(monkeypatch):
    read = set()
    for path in (ROOT / "specplan").rglob("*.py"):
        read |= set(re.findall(r'"(SPECPLAN_[A-Z_]+)"', path.read_text()))
    assert read and read <= set(COPIED), read - set(COPIED)
    monkeypatch.setenv(RAY_EXTRA, "MY_VAR, SPECPLAN_PLAN")
    copy_to_ray()
    copy_to_ray()
    assert os.environ[RAY_EXTRA].split(",") == ["MY_VAR", "SPECPLAN_PLAN",
                                                *[n for n in COPIED if n != "SPECPLAN_PLAN"]]


@pytest.mark.parametrize("held,world", [({0: "a", 1: "-"}, 2), ({0: "a"}, 2)])
def test_a_plan_rank_refuses_when_any_rank_lacks_it(held, world):
    assert refusal(held, world, "a", 1.0)
