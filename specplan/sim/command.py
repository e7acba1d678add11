"""The body of `specplan simulate`: progress per round, the run, the report, an exit code."""

from __future__ import annotations

EXIT_OK, EXIT_INTERNAL, EXIT_FOUND_PROBLEM = 0, 1, 3

# The options' bounds (the CLI's IntRanges): a sim runs a tiny float64 model on the CPU, so
# what it holds is bounded by memory and time, not by the spec's limits.
SIM_MAX_ROUNDS = 4096
SIM_MAX_REQUESTS = 1024
SIM_MAX_SEED = 2**63 - 1  # torch.Generator.manual_seed takes 64 bits
SIM_MAX_LAYERS = 1024
SIM_MAX_KV_ROWS = 2**20  # K/V rows one rank's cache holds per layer
SIM_MAX_TIMEOUT_S = 86_400.0  # --timeout-s: runtime.timeout_s's own bound (a day)
# Tokens a request verifies per round (root included): the CPU model's round grows faster than
# the square of the width (an n-gram chain of 1,200 drafts simulates 2 rounds in about 12 s,
# 2,000 in 45 s, 4,096 in over 5 minutes), past which a run is refused, not left to hang.
SIM_MAX_WIDTH = 1_025


def check_options(*, rounds: int, requests: int, width: int) -> None:
    """Refuse a run whose KV cache would not fit (click.UsageError, naming the options)."""
    import click

    if width > SIM_MAX_WIDTH:
        raise click.UsageError(
            f"the plan verifies {width:,} tokens per request per round (speculative.num_steps / "
            f"num_draft_tokens); simulate runs at most {SIM_MAX_WIDTH:,} on the CPU (its cost grows "
            "faster than the square of the width); check and compile cover this spec")
    rows = requests * (16 + (rounds + 1) * (width + 1))
    if rows > SIM_MAX_KV_ROWS:
        raise click.UsageError(
            f"--rounds {rounds} with --requests {requests}: the sim's KV cache would hold {rows} "
            f"rows per layer ({requests} requests x (16 + (rounds + 1) x (verify width {width} + 1))), "
            f"at most {SIM_MAX_KV_ROWS}; run fewer rounds or requests")


SERVING_INJECTIONS = ("stale-slot", "early-stop")


def run_simulate(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int,
                 inject: str | None, console, as_json: bool = False, chunk: int | None = None,
                 trace_dir: str | None = None, timeout_s: float | None = None) -> int:
    """Progress per round on stderr; the report (text, or with `as_json` the JSON object of
    sim/report.py `report_json`) on stdout. With `chunk`, the serving loop of sim/serving.py.
    With `trace_dir`, every rank writes its runtime trace there (sim/traces.py)."""
    import click

    if trace_dir is not None:
        from specplan.sim.traces import trace_into

        trace_into(trace_dir)

    if chunk is not None or inject in SERVING_INJECTIONS:  # the serving loop (sim/serving.py)
        if chunk is None or inject not in (None, *SERVING_INJECTIONS):
            raise click.UsageError(f"--inject {inject} needs --chunked-prefill" if chunk is None else
                                   f"--chunked-prefill takes --inject {' or '.join(SERVING_INJECTIONS)}, "
                                   f"not {inject}")
        if as_json:
            raise click.UsageError("--json reports a topology run; --chunked-prefill prints its own report")
        from specplan.sim.serving_command import run_serving

        return run_serving(spec, chunk=chunk, requests=requests, seed=seed, inject=inject or "",
                           console=console)
    from specplan.sim.launch import Options, simulate
    from specplan.sim.progress import RoundProgress

    opt = Options(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                  inject=inject or "", timeout_s=timeout_s)
    with RoundProgress(rounds) as progress:
        outcome = simulate(spec, opt, on_round=progress.update)
        if not outcome.results.get(0, {}).get("error"):  # rounds finished after the last poll
            progress.update(rounds)
    outcome.trace_dir = trace_dir
    return report(outcome, inject, console, as_json)


def report(outcome, inject: str | None, console, as_json: bool) -> int:
    """The verdict of a finished run, printed (text or JSON), as an exit code."""
    from specplan.sim.report import render, report_json, verdict

    v = verdict(outcome)
    if not v.ok and not inject and (slow := too_slow(outcome)):
        v.problems.append(slow)
    internal = [r for r, x in outcome.results.items() if x.get("known") is False]
    code = EXIT_OK if v.ok else EXIT_INTERNAL if internal and not inject else EXIT_FOUND_PROBLEM
    if as_json:
        import json
        import sys

        sys.stdout.write(json.dumps(report_json(outcome, v, code), separators=(",", ":")) + "\n")
        return code
    render(outcome, v, console)
    if v.ok:
        return EXIT_OK
    if internal and not inject:
        for r in internal:
            console.print(f"rank {r} hit an internal error:\n{outcome.results[r]['error']}",
                          markup=False)
        return EXIT_INTERNAL
    return EXIT_FOUND_PROBLEM


def too_slow(outcome) -> str | None:
    """A collective that timed out in a plan `check` finds no hang or desync in: the machine was
    too slow for the timeout, not the plan wrong."""
    from specplan.verify import has_errors, verify

    errors = [x.get("error") or "" for x in outcome.results.values()]
    if not any(e.startswith("CollectiveTimeout") for e in errors):
        return None
    plan = outcome.prepared.plan
    if has_errors(verify(plan)):
        return None  # the hang check predicts
    return (f"check finds no hang in this plan: a rank waited the collectives' timeout "
            f"({plan.runtime.timeout_s:g} s) for a peer too slow on this machine; rerun with a larger "
            f"--timeout-s")


def refused_launch(plan, as_json: bool) -> int:
    """The failure a launch refusal predicts, as it happens: the engine does not start, so no
    rank runs a round (even under --allow-errors)."""
    import json

    import click

    line = (f"{plan.engine} refuses to launch this topology: {plan.launch_refusal} "
            "(as the engine's own launch would: nothing was run)")
    if as_json:
        click.echo(json.dumps({"name": plan.name, "world_size": plan.world_size,
                               "method": plan.speculative.method, "sampling": plan.speculative.sampling,
                               "verdict": {"ok": False, "problems": [line]},
                               "exit_code": EXIT_FOUND_PROBLEM}, separators=(",", ":")))
    else:
        click.echo(f"FAIL: {line}")
    return EXIT_FOUND_PROBLEM
