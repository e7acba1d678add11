"""`specplan simulate`: a spec's whole topology as CPU processes (one rank under torchrun, a
deployment's two instances, a serving loop under --chunked-prefill), after check agrees.

`admit` applies every refusal once, for the CLI (`run`) and the API (`simulated`) alike: the
options' bounds, a fault or a size the target cannot run, check's ERROR (unless allow_errors).
"""

from __future__ import annotations

from specplan.commands.common import console
from specplan.commands.load import load_spec_arg
from specplan.commands.target import Refused, Report, Simulation, Target, gate
from specplan.errors import EXIT_FOUND_PROBLEM
from specplan.sim.bounds import check_ranges


def admit(target: Target, sim: Simulation) -> None:
    """Raise what keeps `sim` from running on `target`: an option out of its bounds or of no
    use to the target (usage or spec error, exit 2), check's ERROR (Refused, exit 3)."""
    check_ranges(rounds=sim.rounds, requests=sim.requests, seed=sim.seed,
                 max_layers=sim.max_layers, chunk=sim.chunk, timeout_s=sim.timeout_s)
    target.refuse_simulation(sim)
    if not sim.allow_errors:  # simulate and check never disagree
        gate(target)


def simulated(target: Target, sim: Simulation) -> Report:
    """The API's simulate: the run's Report once `admit` lets it run."""
    admit(target, sim)
    return target.simulated(sim)


def run(spec: str, sim: Simulation) -> int:
    """The CLI's simulate: the report printed, the exit code."""
    from specplan.commands.spec_target import SpecTarget
    from specplan.sim.torchrun import under_torchrun

    target = load_spec_arg(spec)
    out = console()
    if isinstance(target, SpecTarget) and under_torchrun() and sim.chunk is None:
        target.simulate_rank(sim, out)  # one rank of a torchrun job: it leaves with the job's code
        return 0
    try:
        admit(target, sim)
    except Refused as refused:
        target.print_not_simulated(refused, as_json=sim.as_json, console=out)
        return EXIT_FOUND_PROBLEM
    return target.simulate(sim, out)
