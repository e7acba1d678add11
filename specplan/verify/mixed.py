"""Mixed rounds under pipeline parallelism: which rows the sampled-token broadcast covers.

A round may hold prefill chunks and decode rows together (chunked prefill). A row *samples*
when it decodes or when its chunk completes the prompt (its first token). The last stage
samples; earlier stages hold a sampled token only if the broadcast to them covers its row, and
every stage decides which rows it covers by the plan's rule (`pipeline.relay.sampled_rows`)
applied to the scheduler's counts, which are the same on every stage:

    in_broadcast = computed + scheduled >= prompt_len
                   and max(computed - discount, prompt_len) + 1 < max_seq_len

`computed` is inflated: the scheduler advanced it by the whole scheduled width of the row's
previous round (1 + its drafts) and rolls the rejected drafts back only when that round's entry
is consumed, pp rounds later, after this round was scheduled. The stages agree on the set only
if the rule keeps every row whose request goes on after the round (the last stage keeps it and
goes on with its token; an earlier stage left out repeats a stale one). The discount `bound`
(max_drafts: the most drafts a round verifies, num_draft_tokens - 1, which is num_steps
for a chain) is at least any inflation; `drafts` (this round's draft count, the
seed's bug) is not: a row given 3 drafts, none accepted, then 0 drafts reads as finishing.

`explore` proves the rule by enumerating every request shape within small bounds (prompt
length, chunk size, max_tokens) and every sequence of rounds (chunk, then per decode round a
draft count 0..max_drafts and an accepted count 0..drafts), breadth first over the states
(computed, inflation, tokens out), so a violation comes back as the shortest sequence of
rounds that breaks it. Rows are decided one by one from their own counts, so a round mixing
prefill chunks with decode rows agrees exactly when each of its rows does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from specplan.plan import PlanView
from specplan.verify.findings import Finding

MAX_PROMPT, MAX_CHUNK, EXTRA_TOKENS = 3, 2, 3  # the enumeration's bounds besides max_drafts


def in_broadcast(computed: int, scheduled: int, prompt_len: int, max_seq_len: int,
                 discount: int) -> bool:
    """The plan's rule for one row, as every stage evaluates it."""
    produces = computed + scheduled >= prompt_len
    return produces and max(computed - discount, prompt_len) + 1 < max_seq_len


@dataclass(frozen=True)
class Step:
    """One round of one request: a prefill chunk of `tokens`, or a decode with `tokens` drafts
    of which `accepted` pass."""

    kind: str  # chunk | decode
    tokens: int
    accepted: int = 0

    def __str__(self) -> str:
        if self.kind == "chunk":
            return f"prefill chunk of {self.tokens}"
        return f"decode with {self.tokens} drafts, {self.accepted} accepted"


@dataclass(frozen=True)
class Shape:
    prompt_len: int
    chunk: int
    max_tokens: int

    @property
    def max_seq_len(self) -> int:
        return self.prompt_len + self.max_tokens


@dataclass(frozen=True)
class Counterexample:
    shape: Shape
    steps: tuple[Step, ...]  # the last one is the round the broadcast leaves the row out of
    computed: int  # what the scheduler's count reads in that round
    inflation: int
    discount: int
    tokens_out: int  # tokens the request has after that round

    def describe(self) -> str:
        s, n = self.shape, len(self.steps)
        rounds = "; ".join(f"round {i + 1}: {step}" for i, step in enumerate(self.steps))
        return (f"a request with a {s.prompt_len}-token prompt, chunks of {s.chunk} and max_tokens "
                f"{s.max_tokens} (max_seq_len {s.max_seq_len}): {rounds}. In round {n} computed "
                f"reads {self.computed} (inflated by {self.inflation} rejected drafts of round "
                f"{n - 1}), max({self.computed} - {self.discount}, {s.prompt_len}) + 1 >= "
                f"{s.max_seq_len}, so every stage leaves the row out of the broadcast, while the "
                f"last stage samples token {self.tokens_out} of {s.max_tokens} and goes on: "
                f"earlier stages embed a stale token")


@dataclass(frozen=True)
class Exploration:
    shapes: int
    states: int
    rounds: int  # transitions checked
    counterexample: Counterexample | None


def _discount(kind: str, max_drafts: int, drafts: int) -> int:
    return max_drafts if kind == "bound" else drafts


def _moves(shape: Shape, max_drafts: int, c: int, out: int) -> Iterator[tuple[Step, int, int, int]]:
    """(step, scheduled, new computed, tokens sampled) for each round the request can run."""
    if c < shape.prompt_len:
        n = min(shape.chunk, shape.prompt_len - c)
        yield Step("chunk", n), n, c + n, int(c + n >= shape.prompt_len)
        return
    for k in range(max_drafts + 1):
        for a in range(k + 1):
            yield Step("decode", k, a), 1 + k, c + 1 + a, 1 + a


def explore_shape(shape: Shape, max_drafts: int, discount: str) -> tuple[int, int, Counterexample | None]:
    """Breadth first over (computed, inflation, tokens out): (states, rounds, counterexample)."""
    start = (0, 0, 0)
    parent: dict[tuple, tuple | None] = {start: None}
    queue, rounds = deque([start]), 0
    while queue:
        c, infl, out = state = queue.popleft()
        if out >= shape.max_tokens:
            continue  # finished: the scheduler stops it (a redundant tail round is harmless)
        for step, scheduled, c2, sampled in _moves(shape, max_drafts, c, out):
            rounds += 1
            seen = c + infl
            keep = in_broadcast(seen, scheduled, shape.prompt_len, shape.max_seq_len,
                                _discount(discount, max_drafts, step.tokens))
            out2 = out + sampled
            if sampled and out2 < shape.max_tokens and not keep:
                steps = _path(parent, state) + (step,)
                return len(parent), rounds, Counterexample(
                    shape, steps, seen, infl, _discount(discount, max_drafts, step.tokens), out2)
            nxt = (c2, step.tokens - step.accepted if step.kind == "decode" else 0, out2)
            if nxt not in parent:
                parent[nxt] = (state, step)
                queue.append(nxt)
    return len(parent), rounds, None


def _path(parent: dict, state: tuple) -> tuple[Step, ...]:
    steps = []
    while parent[state] is not None:
        state, step = parent[state]
        steps.append(step)
    return tuple(reversed(steps))


@lru_cache(maxsize=32)
def explore(max_drafts: int, discount: str, *, max_prompt: int = MAX_PROMPT,
            max_chunk: int = MAX_CHUNK, extra_tokens: int = EXTRA_TOKENS) -> Exploration:
    """Every request shape within the bounds; the first counterexample, shortest first."""
    shapes = [Shape(p, ch, m) for p in range(1, max_prompt + 1) for ch in range(1, max_chunk + 1)
              for m in range(1, max_drafts + extra_tokens + 1)]
    states = rounds = 0
    best = None
    for shape in shapes:
        n, r, bad = explore_shape(shape, max_drafts, discount)
        states, rounds = states + n, rounds + r
        if bad is not None and (best is None or len(bad.steps) < len(best.steps)):
            best = bad
    return Exploration(len(shapes), states, rounds, best)


def check_mixed(view: PlanView) -> list[Finding]:
    """ERROR when some interleaving leaves a going-on request out of the broadcast."""
    rows = view.plan.pipeline.relay.sampled_rows
    if rows is None:
        return []
    result = explore(view.plan.speculative.num_draft_tokens - 1, rows.discount)
    if result.counterexample is None:
        return []
    return [Finding(
        severity="ERROR", decision="sampled_rows", group="pp", round="decode",
        line=view.line("pipeline.sample_discount"),
        message="the sampled-token broadcast to earlier stages leaves out a request that goes on "
        f"(pipeline.sample_discount: {rows.discount}): " + result.counterexample.describe(),
        fix="subtract the bound (the most drafts a round verifies), at least any draft inflation "
        "(pipeline.sample_discount: bound)")]
