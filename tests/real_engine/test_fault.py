"""A real fault in a real vLLM: one TP rank computes a different speculative decision.

The tests' own vLLM plugin (fault/specplan_test_fault.py, active only under
SPECPLAN_TEST_FAULT_RANK) adds large noise to rank 1's target logits before vLLM 0.32's V2
rejection sampler runs, so rank 1 accepts other drafts and another bonus token than rank 0.
Three runs of TP 2 with the draft model:

- without specplan: the ranks disagree and vLLM does not notice (what it shows is recorded in
  the assertion message: other tokens, a crash or a hang, bounded by the run's timeout);
- with specplan's plugin: the plan converges the accept from its source (rank 0), so the
  tokens equal the clean run's;
- with that site's convergence off (sync.sites) and the probe on every round: the engine
  stops with the runtime's error, naming the decision, its round and the ranks, and every
  process of the engine is gone within 60 s of it.
"""

from __future__ import annotations

import re

import pytest

from tests.real_engine import lane

pytestmark = pytest.mark.real_engine

FAULT = {"SPECPLAN_TEST_FAULT_RANK": "1"}
ACCEPT_SITE = "standalone_accept"
STOP_WITHIN_S = 60


def _plan(tmp_path, **extra):
    return lane.compile_plan(lane.spec("tiny-tp2-fault", tp=2, trace_dir=tmp_path / "trace", **extra),
                             tmp_path)


def _how_it_shows(run: lane.Run, clean: lane.Run) -> str:
    if run.rc == -9:
        return f"hung: killed after {run.wall_s:.0f} s"
    if run.rc != 0:
        return f"exited {run.rc}: {run.tail(5)}"
    return f"exited 0 with other tokens: {run.tokens} (clean run: {clean.tokens})"


def test_without_specplan_the_ranks_disagree(python, models, baselines):
    clean = baselines.get(2, tp=2)
    run = lane.generate(python, lane.engine_args(models, tp=2), ranks=2, extra=FAULT)
    # The fault must matter: were these tokens the clean run's, the next test proved nothing.
    assert not (run.rc == 0 and run.tokens == clean.tokens), "the fault changed nothing"
    print("vLLM without specplan, rank 1 disturbed:", _how_it_shows(run, clean))


def test_with_specplan_the_tokens_equal_the_clean_run(python, models, baselines, tmp_path):
    clean = baselines.get(2, tp=2)
    run = lane.generate(python, lane.engine_args(models, tp=2), ranks=2, plan=_plan(tmp_path), extra=FAULT)
    assert run.rc == 0, run.tail()
    assert run.tokens == clean.tokens


def test_site_off_and_probe_on_stops_every_rank(python, models, tmp_path):
    plan = _plan(tmp_path, sync={"sites": {ACCEPT_SITE: "off"}}, runtime={"probe_every": 1})
    run = lane.generate(python, lane.engine_args(models, tp=2), ranks=2, plan=plan, extra=FAULT)
    assert run.rc not in (0, -9), f"exit {run.rc}:\n{run.tail()}"
    hits = [(t, ln) for t, ln in run.lines if "agreement probe: decision" in ln]
    said = [ln for _, ln in run.lines if "specplan: " in ln or "Error:" in ln]
    assert hits, "no probe line; the plugin's and the engine's errors:\n" + "\n".join(said[:30])
    first_t, first = hits[0]
    assert re.search(r"differs at round \d+ within replica \[0, 1\]", first), first
    assert run.wall_s - first_t <= STOP_WITHIN_S, f"the engine ran {run.wall_s - first_t:.0f} s on"
    # Both ranks computed the probe, raised, and ended their process (the plugin's exit 3 for
    # the runtime's divergence errors): each worker's line names its own rank.
    for rank in (0, 1):
        assert any(f"specplan: rank {rank}: ProbeMismatch" in ln and "(exit 3)" in ln for _, ln in hits), \
            f"rank {rank} did not stop:\n{run.tail()}"
