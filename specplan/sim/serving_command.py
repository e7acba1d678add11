"""The body of `specplan simulate SPEC --chunked-prefill CHUNK`: the serving loop of
specplan/sim/serving.py configured from SPEC's plan, its report and an exit code.

From the plan: pipeline stages (pp), `runtime.max_batch` state rows, the most drafts a round
verifies (num_draft_tokens - 1), the broadcast rule (`pipeline.relay.sampled_rows`), batch
identity (`runtime.batch_identity`) and the relay that carries the sampled tokens (the name a
`BatchMismatch` gives). Exit 0: every request's greedy tokens equal plain decoding; 3: a wrong
token or a `BatchMismatch`.
"""

from __future__ import annotations

from specplan.sim.serving import Outcome, Serving, ServingConfig, make_requests

EXIT_OK, EXIT_FOUND_PROBLEM = 0, 3


def config_from_plan(plan, *, chunk: int, inject: str = "", seed: int = 0) -> ServingConfig:
    relays = plan.pipeline.relay.sites
    relay = next((r for r in relays if "accept" in r.site), relays[0] if relays else None)
    rows = plan.pipeline.relay.sampled_rows
    return ServingConfig(
        pp=len(plan.pipeline.stages), max_batch=plan.runtime.max_batch, chunk=chunk,
        max_drafts=max(0, plan.speculative.num_draft_tokens - 1) if plan.speculative.method != "none" else 0,
        discount=rows.discount if rows is not None else "bound",
        identity=bool(getattr(plan.runtime, "batch_identity", True)), inject=inject,
        site=relay.site if relay else _accept_site(plan), relay_id=relay.id if relay else None, seed=seed)


def _accept_site(plan) -> str:
    """Without a pp relay the sampled tokens reach earlier stages in the accept converge."""
    return next((s.name for s in plan.sites if s.phase == "accept"), "sampled_tokens")


def run_serving(spec: str, *, chunk: int, requests: int, seed: int, inject: str, console) -> int:
    from specplan.lower import build_plan
    from specplan.passes import plan as run_passes
    from specplan.schema import load_spec

    plan = build_plan(run_passes(load_spec(spec)))
    cfg = config_from_plan(plan, chunk=chunk, inject=inject, seed=seed)
    outcome = Serving(cfg, make_requests(requests, seed, chunk)).run()
    for line in report(cfg, outcome, requests):
        console.print(line, markup=False, highlight=False)
    return EXIT_OK if outcome.error is None and outcome.first_wrong is None else EXIT_FOUND_PROBLEM


def report(cfg: ServingConfig, o: Outcome, requests: int) -> list[str]:
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
