"""The serving loop of `specplan simulate --chunked-prefill`: mixed rounds, reused state rows and
pipeline entries in flight, on a toy model whose greedy output is known exactly.

What it models (vLLM MRV2's PP cadence, reference/decisions.md §8 and the seed on EAGLE3 + PP):

- A round holds prefill chunks (at most `chunk` prompt tokens per request per round, every
  round until the prompt is done) beside decode rows; the chunk that completes a prompt samples
  the request's first token. A request that sampled runs again `pp` rounds later (its slot).
- The scheduler's `computed` count is advanced by a decode row's whole width (1 + drafts) and
  the rejected drafts are rolled back only when that round's entry is consumed, after the
  request's next round was scheduled; every stage decides the broadcast's rows from it with
  the plan's rule (`pipeline.relay.sampled_rows`, specplan/verify/mixed.py).
- State rows: `runtime.max_batch` of them; a finished request frees its row at once (its
  generation counter bumps) and a waiting request takes it the next round.
- The last stage samples, drafts (on its own tokens) and sends one entry per round: each row's
  (request, generation), sampled tokens and next drafts. Stage 0, which embeds, consumes an
  entry at its first forward at least `pp` rounds later: the entry of the round `pp` back
  first (its microbatch's), then any left over from rounds that had no rows to run (an empty
  round runs no forward and consumes nothing). Rows of requests freed since, or outside the
  broadcast, are filtered out of both the token and the draft update.
- Stage 0 embeds [last sampled token, drafts] of each decode row; the target's prediction at a
  position is a pure function of the tokens embedded so far (`target_next`), so a stale token
  on stage 0 changes what the last stage accepts. Plain greedy decoding is `plain_decode`.

Injections: `stale-slot` scatters an entry's drafts through the unfiltered row mapping (a
freed request's drafts land in the row its successor now holds); `early-stop` subtracts this
round's draft count instead of the bound.

The stages talk through a `link`. `LocalLink` (here) runs every stage in this process and hands
entries over as they are: the fast model the unit tests drive. `specplan simulate` runs one gloo
process per stage with `serving_rank.GlooLink`: stage 0 forwards what it embeds to the next
stage, and each entry reaches the earlier stages through the bound runtime (the plan's relay,
or the accept converge), stamped with the round it was sent for and the rows each side holds
for it (`views`), so with `runtime.batch_identity` the runtime's guard raises `BatchMismatch`
at the first entry the two sides disagree on.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field

from specplan.runtime.errors import BatchMismatch
from specplan.verify.mixed import in_broadcast

VOCAB, WINDOW = 211, 4
PLACEHOLDER = -1
PAD = (PLACEHOLDER, PLACEHOLDER)  # a row a side leaves out of an entry's update


def _h(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def target_next(tokens) -> int:
    """The toy target's greedy next token: a hash of the last WINDOW tokens."""
    return _h("target", tuple(tokens[-WINDOW:])) % VOCAB


def plain_decode(prompt: list[int], max_tokens: int) -> list[int]:
    seq = list(prompt)
    for _ in range(max_tokens):
        seq.append(target_next(seq))
    return seq[len(prompt):]


@dataclass(frozen=True)
class RequestSpec:
    id: int
    prompt: tuple[int, ...]
    max_tokens: int


@dataclass
class ServingConfig:
    pp: int
    max_batch: int
    chunk: int
    max_drafts: int
    discount: str = "bound"  # bound | drafts
    identity: bool = True
    inject: str = ""  # "" | stale-slot | early-stop
    site: str = "sampled_tokens"  # the relay (or, without one, the accept converge) of an entry
    seed: int = 0
    max_rounds: int = 5000


@dataclass
class Req:
    spec: RequestSpec
    row: int = -1
    gen: int = -1
    computed: int = 0  # tokens whose K/V is committed
    inflation: int = 0  # rejected drafts of the previous round, not yet rolled back
    out: list[int] = field(default_factory=list)
    kv: list[int] = field(default_factory=list)  # the tokens stage 0 embedded, committed
    drafts: list[int] = field(default_factory=list)  # the last stage's proposal
    next_round: int = -1
    decodes: int = 0

    @property
    def prefilling(self) -> bool:
        return self.computed < len(self.spec.prompt)

    @property
    def done(self) -> bool:
        return len(self.out) >= self.spec.max_tokens


@dataclass
class Entry:
    round: int
    rows: list[int]
    pairs: list[tuple[int, int]]
    need: list[bool]  # the rule, as stage 0 evaluates it
    going_on: list[bool]  # what the last stage sent tokens for
    sampled: list[list[int]]
    drafts: list[list[int]]
    samples: list[bool] = field(default_factory=list)  # rows that sampled (sent drafts)


class LocalLink:
    """Every stage in one process: entries and embedded tokens are handed over as they are."""

    def sent(self, e: Entry, rows: list[tuple[int, int]]) -> None:
        pass

    def deliver(self, e: Entry, t: int, mine, sent) -> tuple[list[list[int]], list[list[int]]]:
        return e.sampled, e.drafts

    def forward(self, t: int, xs: list[list[int]]) -> list[list[int]]:
        return xs


@dataclass
class ServingOutcome:
    outputs: dict[int, list[int]]
    expected: dict[int, list[int]]
    error: str | None
    error_round: int | None
    stats: dict

    @property
    def first_wrong(self) -> tuple[int, int, int, int] | None:
        """(request, token index, got, expected) of the first wrong token, by request."""
        for q in sorted(self.expected):
            got, want = self.outputs.get(q, []), self.expected[q]
            for i, w in enumerate(want):
                g = got[i] if i < len(got) else PLACEHOLDER
                if g != w:
                    return q, i, g, w
        return None


class Serving:
    def __init__(self, cfg: ServingConfig, requests: list[RequestSpec], link=None):
        self.cfg, self.waiting = cfg, deque(Req(r) for r in requests)
        self.link = link or LocalLink()
        self.all = {r.spec.id: r for r in self.waiting}
        self.owner: list[Req | None] = [None] * cfg.max_batch
        self.gens = [0] * cfg.max_batch
        self.last = [PLACEHOLDER] * cfg.max_batch  # stage 0's last sampled token per row
        self.draft_rows = [[PLACEHOLDER] * cfg.max_drafts for _ in range(cfg.max_batch)]
        self.pending: list[Entry] = []  # stage 0's entries in flight, in send order
        self.log: list[tuple[int, list[tuple[int, str, int]]]] = []  # (round, [(request, kind, n)])
        self.stats = {"rounds": 0, "skipped_rounds": 0, "mixed_rounds": 0, "reuses": 0,
                      "late_entries": 0, "dropped_rows": 0, "stale_draft_rows": 0}

    # -- the scheduler -------------------------------------------------------------------
    def _admit(self, t: int) -> Req | None:
        free = [r for r in range(self.cfg.max_batch) if self.owner[r] is None]
        if not free or not self.waiting:
            return None
        q = self.waiting.popleft()
        q.row, q.gen = free[0], self.gens[free[0]]
        self.owner[q.row] = q
        if any(q.row in e.rows for e in self.pending):
            self.stats["reuses"] += 1
        self.last[q.row] = PLACEHOLDER
        return q

    def _drafts_for(self, q: Req) -> int:
        """This round's draft count: a pattern that swings between many and none."""
        if self.cfg.max_drafts == 0:
            return 0
        return (self.cfg.max_drafts, 0, 1, self.cfg.max_drafts, 0)[q.decodes % 5]

    def _schedule(self, t: int) -> list[tuple[Req, str, int]]:
        self._admit(t)
        batch = []
        for r in range(self.cfg.max_batch):
            q = self.owner[r]
            if q is None:
                continue
            if q.prefilling:
                batch.append((q, "chunk", min(self.cfg.chunk, len(q.spec.prompt) - q.computed)))
            elif q.next_round == t:
                batch.append((q, "decode", min(self._drafts_for(q), len(q.drafts))))
        return batch

    def _need(self, q: Req, kind: str, n: int) -> bool:
        scheduled = n if kind == "chunk" else 1 + n
        seen = q.computed + (q.inflation if kind == "decode" else 0)
        drafts = n if kind == "decode" else 0
        discount = drafts if (self.cfg.discount == "drafts" or self.cfg.inject == "early-stop") \
            else self.cfg.max_drafts
        return in_broadcast(seen, scheduled, len(q.spec.prompt),
                            len(q.spec.prompt) + q.spec.max_tokens, discount)

    # -- stage 0: consume entries, then embed -------------------------------------------
    def _consume(self, t: int) -> None:
        due = [e for e in self.pending if e.round <= t - self.cfg.pp]
        for e in due:  # over the wire in the order they were sent (oldest first)
            e.sampled, e.drafts = self.link.deliver(e, t, *self.views(e))
        due.sort(key=lambda e: (e.round != t - self.cfg.pp, e.round))  # its microbatch's first
        for e in due:
            self.pending.remove(e)
            if e.round != t - self.cfg.pp:
                self.stats["late_entries"] += 1
            self._apply(e, t)

    def _keep(self, e: Entry) -> list[bool]:
        """Stage 0's filter: in the broadcast by the rule, and the row's request still holds it."""
        return [n and self.gens[row] == g for n, row, (_, g) in zip(e.need, e.rows, e.pairs)]

    def views(self, e: Entry) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Per row of an entry, the (request, generation) each side updates, or PAD for a row
        it leaves out: (stage 0's, the last stage's). The last stage sent tokens and drafts for
        the rows that go on; stage 0 updates the rows its filter keeps and, with stale-slot,
        writes the drafts of every row that sampled into whatever request holds the row now."""
        sent = [p if on else PAD for p, on in zip(e.pairs, e.going_on)]
        mine = []
        for i, (p, k) in enumerate(zip(e.pairs, self._keep(e))):
            holder = self._owner_pair(e.rows[i])
            if k:
                mine.append(p)
            elif self.cfg.inject == "stale-slot" and e.samples[i] and holder not in (None, p):
                mine.append(holder)
            else:
                mine.append(PAD)
        return mine, sent

    def _apply(self, e: Entry, t: int) -> None:
        keep = self._keep(e)
        writes = range(len(e.rows)) if self.cfg.inject == "stale-slot" else \
            [i for i, k in enumerate(keep) if k]
        for i, k in enumerate(keep):
            if k:
                self.last[e.rows[i]] = e.sampled[i][-1]
            elif e.going_on[i]:
                self.stats["dropped_rows"] += 1
        for i in writes:
            if not keep[i] and self.owner[e.rows[i]] is not None:
                self.stats["stale_draft_rows"] += 1
            self.draft_rows[e.rows[i]] = list(e.drafts[i])

    def _owner_pair(self, row: int) -> tuple[int, int] | None:
        q = self.owner[row]
        return None if q is None else (q.spec.id, q.gen)

    # -- the last stage ------------------------------------------------------------------
    def _propose(self, q: Req) -> list[int]:
        seq, out = list(q.spec.prompt) + q.out, list[int]()
        for i in range(self.cfg.max_drafts):
            tok = target_next(seq + out)
            if _h("draft", self.cfg.seed, q.spec.id, len(seq) + i) % 5 < 2:
                tok = (tok + 1) % VOCAB  # a wrong guess, rejected by verify
            out.append(tok)
        return out

    def _embed(self, q: Req, kind: str, n: int) -> list[int]:
        """What stage 0 embeds for a row: a prompt chunk, or [last sampled token, drafts]."""
        if kind == "chunk":
            return list(q.spec.prompt[q.computed:q.computed + n])
        return [self.last[q.row]] + self.draft_rows[q.row][:n]

    def _run(self, q: Req, kind: str, n: int, x: list[int]) -> tuple[list[int], bool]:
        """Stage 0's inputs `x` through the last stage; (sampled tokens, samples)."""
        if kind == "chunk":
            q.kv += x
            q.computed += n
            if q.prefilling:
                return [], False
            return [target_next(q.kv)], True
        preds = [target_next(q.kv + x[:j + 1]) for j in range(n + 1)]
        a = 0
        while a < n and q.drafts[a] == preds[a]:
            a += 1
        q.kv += x[:1 + a]
        q.computed += 1 + a
        q.inflation = n - a
        return q.drafts[:a] + [preds[a]], True

    def round(self, t: int) -> None:
        batch = self._schedule(t)
        if not batch:
            self.stats["skipped_rounds"] += 1
            return
        self.stats["rounds"] += 1
        self.log.append((t, [(q.spec.id, kind, n) for q, kind, n in batch]))
        if len({kind for _, kind, _ in batch}) == 2:
            self.stats["mixed_rounds"] += 1
        need = [self._need(q, kind, n) for q, kind, n in batch]
        self._consume(t)
        entry = Entry(t, [q.row for q, _, _ in batch], [(q.spec.id, q.gen) for q, _, _ in batch],
                      need, [], [], [])
        xs = self.link.forward(t, [self._embed(q, kind, n) for q, kind, n in batch])
        for (q, kind, n), x in zip(batch, xs):
            sampled, samples = self._run(q, kind, n, x)
            if kind == "decode":
                q.decodes += 1
            q.out = (q.out + sampled)[:q.spec.max_tokens]
            if samples:
                q.drafts = self._propose(q)
                q.next_round = t + self.cfg.pp
            entry.sampled.append(sampled or [PLACEHOLDER])
            entry.drafts.append(q.drafts if samples else [PLACEHOLDER] * self.cfg.max_drafts)
            entry.going_on.append(samples and not q.done)
            entry.samples.append(samples)
        for q, _, _ in batch:  # the scheduler frees finished rows at once
            if q.done and self.owner[q.row] is q:
                self.owner[q.row] = None
                self.gens[q.row] += 1
        if self.cfg.pp > 1:
            self.link.sent(entry, self.views(entry)[1])
            self.pending.append(entry)
        else:
            self._apply(entry, t)

    def run(self) -> ServingOutcome:
        error, at = None, None
        t = 0
        try:
            while self.waiting or any(self.owner):
                if t >= self.cfg.max_rounds:
                    raise RuntimeError(f"serving did not finish in {t} rounds")
                self.round(t)
                t += 1
        except BatchMismatch as exc:
            error, at = str(exc), t
        self.stats["wall_rounds"] = t
        return ServingOutcome({q: r.out for q, r in self.all.items()},
                              {q: plain_decode(list(r.spec.prompt), r.spec.max_tokens)
                               for q, r in self.all.items()}, error, at, self.stats)


def make_requests(n: int, seed: int, chunk: int) -> list[RequestSpec]:
    """`n` requests: prompts from 1 to 3 chunks (every other one fits one chunk, so a row freed
    at the end of a round is taken by a request that samples at once), 4 to 11 tokens each."""
    out = []
    for q in range(n):
        h = _h("request", seed, q)
        length = max(1, chunk - h % 2) if q % 2 else chunk + 1 + h % (2 * chunk)
        prompt = tuple(_h("prompt", seed, q, i) % VOCAB for i in range(length))
        out.append(RequestSpec(q, prompt, 4 + (h >> 8) % 8))
    return out
