"""What a simulate run may hold: its options' bounds (the CLI's IntRanges), the faults it can
inject and the checks of a run against them before anything starts (torch-free: the parent of
the ranks never imports torch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from specplan.methods import METHODS

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


@dataclass(frozen=True)
class Ranges:
    """Each option's closed range (low, high; None: unbounded above), the one table: the CLI's
    IntRange / FloatRange and the API's check (check_ranges) both read it."""

    rounds: tuple[int, int] = (1, SIM_MAX_ROUNDS)
    requests: tuple[int, int] = (1, SIM_MAX_REQUESTS)
    seed: tuple[int, int] = (0, SIM_MAX_SEED)
    max_layers: tuple[int, int] = (1, SIM_MAX_LAYERS)
    chunk: tuple[int, None] = (1, None)
    timeout_s: tuple[float, float] = (1, SIM_MAX_TIMEOUT_S)


RANGES = Ranges()


def option_name(key: str) -> str:
    """The CLI's spelling of a RANGES key (--chunked-prefill for chunk)."""
    return "--chunked-prefill" if key == "chunk" else "--" + key.replace("_", "-")


def check_ranges(**values: float | None) -> None:
    """Refuse a value outside its RANGES entry (None: left out) as click's ranges refuse it
    (click.BadParameter naming the option); nan is outside every range."""
    import click

    for key, value in values.items():
        low, high = getattr(RANGES, key)
        if value is not None and not (low <= value and (high is None or value <= high)):
            span = f"{low}<=x<={high}" if high is not None else f"x>={low}"  # click's wording
            raise click.BadParameter(f"{value} is not in the range {span}.",
                                     param_hint=f"'{option_name(key)}'")


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


@dataclass(frozen=True)
class Fault:
    """One `simulate --inject` fault. `where`: what runs it: each rank's decisions (sim/faults.py),
    a rank killed (sim/worker.py), the plan the ranks load (sim/launch.py), a deployment's
    handoff (deploy/simulate.py) or the serving loop (sim/serving.py); `torchrun`: whether a
    torchrun job runs it (else only simulate's own launcher)."""

    name: str
    where: Literal["decisions", "rank", "plan", "deployment", "serving", "gates"]
    torchrun: bool = False


# The one catalogue of simulate's faults: the CLI's choices and every reader's set come from it.
FAULTS = (Fault("noise", "decisions", True), Fault("draft-noise", "decisions", True),
          Fault("verify-noise", "decisions", True), Fault("tap-order", "decisions", True),
          Fault("kill", "rank"), Fault("foreign-plan", "plan", True),
          Fault("layer-map", "deployment"), Fault("stale-slot", "serving"), Fault("early-stop", "serving"),
          Fault("gate", "gates", True))  # and gate:<name> (is_gate)


def faults(*where: str) -> tuple[str, ...]:
    """The names of the faults run at `where` (none given: every fault), in the catalogue's order."""
    return tuple(f.name for f in FAULTS if not where or f.where in where)


NOT_UNDER_TORCHRUN = tuple(f.name for f in FAULTS if not f.torchrun)
# The methods verify-noise perturbs: a block verified against a plan or the target's predictions.
VERIFY_PLANS = tuple(name for name, m in METHODS.items() if m.round == "block")


def is_gate(inject: str | None) -> bool:
    """`--inject gate` (every gate of the plan) or `gate:<name>` (one)."""
    return inject is not None and (inject == "gate" or inject.startswith("gate:"))


def gate_refusal(inject: str, gates: tuple[str, ...]) -> str | None:
    """Why `--inject gate[:name]` cannot apply to a plan with these gates, or None."""
    if not is_gate(inject):
        return None
    if not gates:
        return ("--inject gate diverges the plan's gates, and this plan has none (engines/"
                "<engine>/gates.py: none applies to this method and topology)")
    name = inject.partition(":")[2]
    if inject != "gate" and name not in gates:
        return f"--inject {inject}: the plan has no gate {name!r}; its gates: {', '.join(gates)}"
    return None


def refusal(method: str, sampling: str, inject: str, pp: int, taps: bool,
            gates: tuple[str, ...] = ()) -> str | None:
    """Why `inject` cannot apply to `method` (and the plan's `gates`), or None."""
    if is_gate(inject):
        return gate_refusal(inject, gates)
    m = METHODS[method]
    if inject == "draft-noise" and not m.draft_model:
        return f"--inject draft-noise perturbs a drafter's logits; method {method} has no drafter model"
    if inject == "verify-noise" and method not in VERIFY_PLANS:
        return (f"--inject verify-noise perturbs the verify plans of {' and '.join(VERIFY_PLANS)}; "
                f"method {method} has none")
    if inject == "tap-order" and (pp < 3 or not taps):
        tapped = ", ".join(name for name, x in METHODS.items() if x.needs_taps)
        return (f"--inject tap-order misroutes taps on a middle stage: it needs pp >= 3 (found "
                f"{pp}) and a method with taps ({tapped}; found {method})")
    if inject == "verify-noise" and not m.plans_verify and sampling == "sampling":
        return (f"--inject verify-noise perturbs {method}'s greedy verify (target_predict); "
                "speculative.sampling: sampling makes none (greedy or mixed do)")
    return None
