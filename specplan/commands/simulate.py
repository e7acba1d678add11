"""`specplan simulate`: a spec's whole topology as CPU processes (one rank under torchrun, a
deployment's two instances, a serving loop under --chunked-prefill), after check agrees."""

from __future__ import annotations

from specplan.commands.common import console
from specplan.commands.load import load_spec_arg
from specplan.commands.target import Simulation


def run(spec: str, *, rounds: int, requests: int, seed: int, max_layers: int, inject: str | None,
        chunk: int | None, allow_errors: bool, as_json: bool, trace_dir: str | None,
        timeout_s: float | None = None) -> int:
    target = load_spec_arg(spec)
    sim = Simulation(rounds=rounds, requests=requests, seed=seed, max_layers=max_layers,
                     inject=inject, chunk=chunk, allow_errors=allow_errors, as_json=as_json,
                     trace_dir=trace_dir, timeout_s=timeout_s)
    return target.simulate(sim, console())
