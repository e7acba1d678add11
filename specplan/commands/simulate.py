"""`specplan simulate`: a spec's whole topology as CPU processes (one rank under torchrun, a
deployment's two instances, a serving loop under --chunked-prefill), after check agrees."""

from __future__ import annotations

import sys

import click

from specplan.commands.common import EXIT_FOUND_PROBLEM, console, load_spec_arg


def run(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int, inject: str | None,
        chunk: int | None, allow_errors: bool, as_json: bool, trace_dir: str | None,
        timeout_s: float | None = None) -> int:
    from specplan.commands.deployment import simulate as simulate_deployment
    from specplan.deploy import InstancePair
    from specplan.plan.build import compile
    from specplan.sim.command import check_options, refused_launch, run_simulate
    from specplan.sim.faults import refusal
    from specplan.sim.torchrun import simulate_rank, under_torchrun
    from specplan.verify import formats, has_errors, verify
    from specplan.verify.report import subject_of

    target = load_spec_arg(spec)
    if under_torchrun() and not isinstance(target, InstancePair) and chunk is None:
        return simulate_rank(spec, target, rounds=rounds, requests=requests, seed=seed,  # one rank of a torchrun job
                             max_layers=max_layers, inject=inject, allow_errors=allow_errors,
                             as_json=as_json, trace_dir=trace_dir, console=console(),
                             timeout_s=timeout_s)
    if isinstance(target, InstancePair) or inject == "layer-map":  # layer-map: deployments only
        return simulate_deployment(target, rounds=rounds, requests=requests, seed=seed,
                                   max_layers=max_layers, inject=inject, allow_errors=allow_errors,
                                   console=console(), timeout_s=timeout_s)
    findings = verify(plan := compile(target))
    if why := refusal(plan.speculative.method, plan.speculative.sampling, inject or "",
                      len(plan.pipeline.stages), bool(plan.speculative.taps)):
        raise click.UsageError(why)
    check_options(rounds=rounds, requests=requests, width=plan.speculative.num_draft_tokens)
    if has_errors(findings) and not allow_errors:  # simulate and check never disagree
        sys.stdout.write(formats.to_json(findings) if as_json else formats.render_text(
            subject_of(plan), findings, width=formats.terminal_width(), verbose=False))
        click.echo("not simulated: `specplan check` predicts the failures above; run with "
                   "--allow-errors to watch them happen", err=True)
        return EXIT_FOUND_PROBLEM
    if isinstance(plan.launch_refusal, str):  # --allow-errors: the engine's launch is what fails
        return refused_launch(plan, as_json)
    return run_simulate(spec, rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                        inject=inject, console=console(), as_json=as_json, chunk=chunk,
                        trace_dir=trace_dir, timeout_s=timeout_s)
