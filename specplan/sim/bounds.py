"""What a simulate run may hold: its options' bounds (the CLI's IntRanges) and the check of a
run against them before anything starts."""

from __future__ import annotations

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
