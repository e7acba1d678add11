"""The run behind `specplan simulate SPEC --chunked-prefill CHUNK` (its command body:
commands/sim_run.py): the serving loop of specplan/sim/serving.py configured from SPEC's plan,
run as one gloo process per pipeline stage (specplan/sim/serving_rank.py), and its report.

From the plan: pipeline stages (pp), `runtime.max_batch` state rows, the most drafts a round
verifies (num_draft_tokens - 1), the broadcast rule (`pipeline.relay.sampled_rows`), batch
identity (`runtime.batch_identity`) and the relay that carries the sampled tokens (the name a
`BatchMismatch` gives). Exit 0: every request's greedy tokens equal plain decoding; 3: a wrong
token or a `BatchMismatch` (raised by the runtime's guard on an earlier stage); 1: a rank
failed otherwise; 2: a spec whose stages are not one rank each (tp, dp, cp 1).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from specplan.methods import METHODS
from specplan.sim.serving import ServingConfig, ServingOutcome, plain_decode

GRACE_S = 15.0  # after a rank stopped on a mismatch, the others' time to finish theirs
DEADLINE_S = 600.0


def config_from_plan(plan, *, chunk: int, inject: str = "", seed: int = 0) -> ServingConfig:
    relays = plan.pipeline.relay.sites
    relay = next((r for r in relays if "accept" in r.site), relays[0] if relays else None)
    rows = plan.pipeline.relay.sampled_rows
    drafts = plan.speculative.num_draft_tokens - 1 if METHODS[plan.speculative.method].speculates else 0
    return ServingConfig(
        pp=len(plan.pipeline.stages), max_batch=plan.runtime.max_batch, chunk=chunk,
        max_drafts=max(0, drafts),
        discount=rows.discount if rows is not None else "bound",
        identity=bool(getattr(plan.runtime, "batch_identity", True)), inject=inject,
        site=relay.site if relay else _accept_site(plan), seed=seed)


def _accept_site(plan) -> str:
    """Without a pp relay the sampled tokens reach earlier stages in the accept converge."""
    return next((s.name for s in plan.sites if s.phase == "accept"), "sampled_tokens")


def cpu_plan(spec, where: Path):
    """SPEC's plan on the CPU (gloo), whatever its topology.device: the serving loop runs on
    the CPU, as plain simulate does; nothing else of the spec changes."""
    from specplan.sim.setup import compile_data

    data = spec.model_dump(mode="json", exclude_none=True)
    data["topology"].update(device="cpu", nodes=1)
    data["topology"].pop("backend", None)
    return compile_data(data, where)


def launch(plan, cfg: ServingConfig, reqs, sim_dir: Path) -> tuple[dict[int, dict | None], list[str]]:
    """One gloo process per stage (sim/launch.py's start) in `sim_dir`; {rank: its result}, notes."""
    from specplan.sim.launch import kill_all, start

    (sim_dir / "plan.json").write_text(plan.dumps())
    (sim_dir / "serving.json").write_text(json.dumps(
        {"config": asdict(cfg), "requests": [[r.id, list(r.prompt), r.max_tokens] for r in reqs]}))
    procs = start(sim_dir, cfg.pp, module="specplan.sim.serving_rank")
    notes = []
    try:
        end, stopped = time.monotonic() + DEADLINE_S, None
        while any(p.poll() is None for p in procs):
            if stopped is None and any(p.poll() not in (None, 0) for p in procs):
                stopped = time.monotonic()  # the others wait on it: give them a moment
            if stopped is not None and time.monotonic() - stopped > GRACE_S:
                break
            if time.monotonic() > end:
                notes.append(f"the run passed its deadline of {DEADLINE_S:g}s: every rank killed")
                break
            time.sleep(0.05)
    finally:
        kill_all(procs)
    results: dict[int, dict | None] = {}
    for rank in range(cfg.pp):
        path = sim_dir / f"rank{rank}.json"
        results[rank] = json.loads(path.read_text()) if path.exists() else None
    return results, notes


def collect(cfg: ServingConfig, reqs, results: dict[int, dict | None]) -> tuple[ServingOutcome, list[str]]:
    """The run's outcome: the last stage's tokens, stage 0's counts, and the first error (by
    rank) the runtime raised; or the lines naming ranks that failed otherwise."""
    expected = {r.id: plain_decode(list(r.prompt), r.max_tokens) for r in reqs}
    stopped = [(k, r) for k, r in sorted(results.items()) if r and r.get("error") and not r.get("crashed")]
    if stopped:
        k, r = stopped[0]
        error = r["error"].removeprefix("BatchMismatch: ")
        at = r.get("error_round")
        where = (f" (raised by the runtime's guard on rank {k}, stage {r.get('pipeline_stage', k)}"
                 + (f", consuming the entry at round {at})" if at is not None else ")"))
        return ServingOutcome({}, expected, error + where, at, r.get("stats", _EMPTY)), []
    missing = [k for k, r in results.items() if not r or r.get("error")]
    if missing:
        return ServingOutcome({}, expected, None, None, {}), [
            f"rank {k} failed: {(results[k] or {}).get('error') or 'no result (killed)'}" for k in missing]
    last, first = results[cfg.pp - 1], results[0]
    assert last is not None and first is not None  # no rank missing: every one has its result
    outputs = {int(q): v for q, v in last["outputs"].items()}
    return ServingOutcome(outputs, expected, None, None, first["stats"]), []


_EMPTY = {"rounds": 0, "skipped_rounds": 0, "mixed_rounds": 0, "reuses": 0, "late_entries": 0,
          "dropped_rows": 0, "stale_draft_rows": 0}


def report(cfg: ServingConfig, o: ServingOutcome, requests: int) -> list[str]:
    s = o.stats
    head = (f"serving {requests} requests: pp {cfg.pp}, {cfg.max_batch} state rows, prompt chunks of "
            f"{cfg.chunk}, up to {cfg.max_drafts} drafts a round, broadcast discount {cfg.discount}, "
            f"batch identity {'on' if cfg.identity else 'off'}"
            + (f"; injected: {cfg.inject}" if cfg.inject else ""))
    body = (f"  rounds run: {s['rounds']} (none to run: {s['skipped_rounds']}), mixing prefill chunks "
            f"and decode rows: {s['mixed_rounds']}; rows reused while an entry of their last request "
            f"was in flight: {s['reuses']}; entries consumed late: {s['late_entries']}")
    if o.error is not None:
        return [head, body, f"FAIL: stopped: BatchMismatch: {o.error}"]
    wrong = o.first_wrong
    total = sum(len(v) for v in o.expected.values())
    if wrong is None:
        note = "" if not cfg.inject else (
            f" ({cfg.inject} did not change a token in this schedule: {s['stale_draft_rows']} stale "
            f"draft rows written, {s['dropped_rows']} rows left out of a broadcast; try more "
            f"requests or another --seed)")
        return [head, body, f"PASS: token-identical to plain greedy decoding: {len(o.expected)} "
                            f"requests, {total} tokens{note}"]
    q, i, got, want = wrong
    bad = sum(1 for r in o.expected for a, b in zip(o.outputs[r], o.expected[r]) if a != b)
    return [head, body, f"FAIL: wrong tokens: the first is request {q} token {i}: {got} where plain "
                        f"greedy decoding gives {want} ({bad} of {total} tokens differ; "
                        f"{s['dropped_rows']} rows left out of a broadcast, "
                        f"{s['stale_draft_rows']} stale draft rows written)"]
