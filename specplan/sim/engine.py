"""One rank of the sim engine: its shard, its stage, its replica's requests, and the runtime.

The engine owns state and the pipeline forward; `specplan.sim.rounds` holds each method's
round. Every decision a round takes goes through `decide`, which converges the plan's
boundaries for the named sites (once per boundary, all its decisions together) and relays
what the plan relays; rows past a request's accepted path never reach the KV cache.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass

import torch
import torch.distributed as dist

from specplan.engines import convention
from specplan.runtime.errors import RuntimeDivergence
from specplan.sim import faults
from specplan.sim.comm import Comm, make_shard
from specplan.sim.drafter import Head
from specplan.sim.model import F64, KVCache, ModelConfig, Segment, logits_of, run_layers
from specplan.sim.setup import idle_replica
from specplan.sim.weights import init_weights


@dataclass(frozen=True)
class SimConfig:
    """What every rank is told besides the plan (written to sim.json by the launcher)."""

    model: ModelConfig
    rounds: int
    requests: int
    seed: int = 0
    inject: str = ""  # "" | noise | draft-noise | verify-noise | kill (sim/faults.py)
    kill_rank: int = -1
    kill_round: int = -1
    noise: float = 8.0
    temperature: float = 0.7
    spec: bool = True  # False: plain decoding, one token per round (benchmark baseline)
    unfused: bool = False  # one collective per decision instead of one per boundary
    progress: str = ""  # file rank 0 writes the finished round to


def prompt_of(seed: int, request: int, vocab: int) -> list[int]:
    g = torch.Generator().manual_seed(zlib.crc32(f"prompt/{seed}/{request}".encode()))
    n = int(torch.randint(6, 14, (1,), generator=g))
    return torch.randint(0, vocab, (n,), generator=g).tolist()


def coins(seed: int, request: int, position: int, n: int, salt: int = -1) -> torch.Tensor:
    """Uniform coins of a request at a position. Every rank draws its own (an rng decision),
    as an engine's per-rank generator does; a replica's source draws the unsalted ones
    (`salt` -1), so a run whose converges cover every rank equals the single-process one, and
    a rank no converge reaches keeps coins of its own."""
    tag = f"coin/{seed}/{request}/{position}" + (f"/rank{salt}" if salt >= 0 else "")
    g = torch.Generator().manual_seed(zlib.crc32(tag.encode()))
    return torch.rand(n, generator=g, dtype=F64)


class LayoutMismatch(RuntimeDivergence):
    """A rank reads another tensor than the plan's names promise (taps, layer ids)."""


def produced_taps(plan, stage: int) -> tuple[int, ...]:
    """The residuals (global layer ids) a stage hands the drafter, as the plan numbers taps:
    global ids name one owner; stage-local ids are read by every stage from its own first
    layer (tap 0 included), so ids collide and far ids go missing; dropped routing hands over
    the last stage's own only."""
    pipe = plan.pipeline
    st = pipe.stages[stage]
    if pipe.aux_routing == "dropped" and stage != len(pipe.stages) - 1:
        # SGLang 0.5.23: a non-last stage returns PPProxyTensors of hidden states and residual
        # only (srt/models/llama.py `residual_batch.to_pp`); its captures never leave it.
        return ()
    if pipe.tap_ids == "global":
        return tuple(st.taps)
    return tuple(st.start_layer + t.tap for t in pipe.taps if stage in t.producers)


def shadowed(w: dict, plan, layers: range) -> dict:
    """Weights as a checkpoint loader names them: a draft layer whose id is one of this
    stage's target layers lands on that layer's names (pipeline.draft_layer_ids:
    stage_local), so the target layer runs with the drafter's weights."""
    drafter = plan.pipeline.drafter
    clash = [i for i in (drafter.layer_ids if drafter else ()) if i in layers]
    if not clash:
        return w
    w = dict(w)
    g = torch.Generator().manual_seed(zlib.crc32(b"draft-layer"))
    for i in clash:
        for name in [k for k in w if k.startswith(f"layers.{i}.")]:
            w[name] = torch.randn(w[name].shape, generator=g, dtype=F64) * w[name].std()
    return w


class Engine:
    def __init__(self, rt, sim: SimConfig):
        view, p = rt.plan, rt.plan.plan
        self.rt, self.sim, self.view, self.cfg = rt, sim, view, sim.model
        sp = p.speculative
        self.method = sp.method
        self.m = convention(p.engine).method(sp.method)  # what the round asks of it (methods/base.py)
        self.lookup = self.m.drafter == "lookup"  # n-gram: drafts from the corpus, no drafter state
        self.sampling_mode = sp.sampling
        self.steps, self.topk = sp.num_steps, sp.topk
        self.width = sp.num_draft_tokens
        stages = p.pipeline.stages
        self.stage, self.num_stages = view.stage_of(rt.rank), len(stages)
        me = stages[self.stage]
        self.layers = range(me.start_layer, me.end_layer)
        self.own_taps = produced_taps(p, self.stage)
        self.taps_before = sum(len(produced_taps(p, s)) for s in range(self.stage))
        self.first, self.last = self.stage == 0, self.stage == self.num_stages - 1
        self.pp_ranks = rt.ranks["pp"]
        self.comm = Comm(rt)
        dp_attn = p.derived.get("attn_dp", 1) > 1
        self.shard = make_shard(rt, self.comm, dp_attn)
        self.w = shadowed(init_weights(self.cfg), p, self.layers)
        self.head = Head(self.w, standalone=self.m.drafter == "model")
        faults.install(self)  # --inject draft-noise: a perturbed rank's drafter
        fam = view.families["replica"]
        serving = fam.num_groups - (idle_replica(p) is not None)  # sim/setup.py idle_replica
        self.requests = [q for q in range(sim.requests) if q % serving == rt.replica]
        self.max_len = 16 + (sim.rounds + 1) * (self.width + 1)
        self.cache = KVCache(self.layers, len(self.requests) * self.max_len,
                             self.shard.local_heads(self.cfg), self.cfg.head_dim)
        self.tokens = [prompt_of(sim.seed, q, self.cfg.vocab) for q in self.requests]
        self.prompt_lens = [len(t) for t in self.tokens]
        self.cache_len = [0] * len(self.requests)
        self.state: dict = {}  # last stage: drafter context and proposal
        self.round = 0
        self.held: dict = {}
        self._programs: dict = {}
        self.timers: dict = defaultdict(float)
        self.runtime_calls: Counter = Counter()
        self.runtime_bytes: Counter = Counter()
        self.commits: dict[int, list[int]] = {}
        # Last stage: the target's argmax at every committed token, which the report compares
        # with the model on one process where sampling leaves no token reference.
        self.predicted: list[list[int]] = [[] for _ in self.requests]
        self.scores: list[list[float]] = [[] for _ in self.requests]  # the predicted tokens' logits
        self.picks = torch.empty(0, dtype=torch.int64)
        self.peaks = torch.empty(0, dtype=F64)

    @property
    def bs(self) -> int:
        return len(self.requests)

    @property
    def sampling(self) -> bool:
        """Whether this round's batch holds sampled rows. `mixed`: the batch alternates
        between all-greedy rounds (even) and rounds with sampled rows (odd), so both accept
        sites of a mixed plan fire, one per round, as SGLang picks them."""
        if self.sampling_mode == "mixed":
            return self.round % 2 == 1
        return self.sampling_mode == "sampling"

    # -- decisions ---------------------------------------------------------------------------
    def decide(self, sites, values: dict | None) -> dict:
        """Converge every boundary of `sites` once, then relay what the plan relays."""
        sites = [sites] if isinstance(sites, str) else list(sites)
        t0 = time.perf_counter()
        out, done = {}, set()
        for name in sites:
            site = self.view.sites[name]
            mine = {d.name for d in site.decisions}
            if site.boundary is None or not self._runs(site):
                out.update({k: v for k, v in (values or {}).items() if k in mine})
            elif site.boundary not in done:
                done.add(site.boundary)
                out.update(self._converge(site.boundary, values))
        for name in sites:
            relay = self.view.relay_of(name)
            if relay is not None:
                sent = {k: out[k] for k in relay.decisions} if self.last else None
                out.update(self.rt.relay(name, sent, round=self.round, live_rows=self.bs))
                self._count(relay)
        self.timers["converge"] += time.perf_counter() - t0
        self._placeholders(sites, out)
        self._hold(sites, out)
        return out

    def _runs(self, site) -> bool:
        """Whether this stage's program converges `site`'s boundary: a per-stage family (tp
        under pp > 1) converges on the stage that decides; the others get the relay."""
        key = (self.stage, site.round)
        if key not in self._programs:
            self._programs[key] = set(self.view.program(*key))
        return ("boundary", site.boundary) in self._programs[key]

    def _placeholders(self, sites, out: dict) -> None:
        """A decision the last stage made that never reached this stage (pipeline.relay_drafts:
        false) is what the engine's preallocated buffer holds: zeros, which stage 0 embeds."""
        if self.last:
            return
        from specplan.methods.base import eval_dim

        symbols = dict(self.view.symbols, bs=self.bs)
        for name in sites:
            for d in self.view.sites[name].decisions:
                if d.name not in out:
                    shape = [eval_dim(x, symbols) for x in d.symbols]
                    out[d.name] = torch.zeros(shape, dtype=getattr(torch, d.dtype))

    def _converge(self, boundary: int, values):
        b = self.view.boundaries[boundary]
        self._count(b)
        if self.sim.unfused and b.op == "broadcast":
            return self._unfused(b, values)
        return self.rt.converge(boundary, values, round=self.round, live_rows=self.bs,
                                requests=self.requests)

    def _unfused(self, b, values) -> dict:
        """The benchmark's baseline: one broadcast per decision, no guard header."""
        group, ranks = self.rt.groups[b.family], self.rt.ranks[b.family]
        source, out = ranks[b.source_member], {}
        for f in b.fields:
            shape = self.view.live_shape(f, self.bs)
            t = values[f.decision].contiguous() if self.rt.rank == source else \
                torch.empty(shape, dtype=getattr(torch, f.dtype))
            self.comm._wait(dist.broadcast(t, src=source, group=group, async_op=True),
                            "broadcast", b.family)
            out[f.decision] = t
        self.runtime_calls[self.round] += len(b.fields) - 1
        return out

    def _count(self, b) -> None:
        if len(self.rt.ranks.get(b.family, [])) > 1:
            self.runtime_calls[self.round] += 1
            self.runtime_bytes[self.round] += b.buffer_bytes

    def _hold(self, sites, out: dict) -> None:
        """Decisions every rank of the replica holds feed the probe: a replica-wide site's, and
        under pp > 1 those every stage reads (readers all_stages): what the relay carries, or,
        where the plan relays nothing (pipeline.relay_drafts: false), the placeholders an
        earlier stage embeds instead, which then differ from the last stage's values."""
        if self.num_stages == 1:
            self.held.update(out)
            return
        for name in sites:
            site = self.view.sites[name]
            if site.family != "replica" and site.readers != "all_stages":
                continue
            relay = self.view.relay_of(name)
            names = relay.decisions if relay is not None else [d.name for d in site.decisions]
            self.held.update({k: out[k] for k in names if k in out})

    def probe(self) -> None:
        t0 = time.perf_counter()
        held = dict(self.held, seq_lens=torch.tensor(self.cache_len, dtype=torch.int64))
        if self.rt.maybe_probe(self.round, held) and len(self.rt.ranks["replica"]) > 1:
            self.runtime_calls[self.round] += 1
            self.runtime_bytes[self.round] += 8 * (len(self.view.decisions()) + 3)
        self.held = {}
        self.timers["probe"] += time.perf_counter() - t0

    # -- the pipeline forward ----------------------------------------------------------------
    def segments(self, counts: list[int], masks: list[torch.Tensor]) -> list[Segment]:
        segs, row = [], 0
        for b, (n, m) in enumerate(zip(counts, masks)):
            segs.append(Segment(slice(row, row + n), b * self.max_len, self.cache_len[b], m))
            row += n
        return segs

    def forward(self, tokens: torch.Tensor, segs: list[Segment]):
        """Run this stage over the flat rows; the last stage returns (logits, hidden, taps)."""
        t0 = time.perf_counter()
        n, h = tokens.shape[0], self.cfg.hidden
        if self.first:
            x, taps_in = self.w["embed"][tokens], torch.empty(n, 0, dtype=F64)
        else:
            peer = self.pp_ranks[self.stage - 1]
            x = self.comm.recv((n, h), peer)
            taps_in = self.comm.recv((n, h * self.taps_before), peer) if self.taps_before else \
                torch.empty(n, 0, dtype=F64)
        x, new_kv, tapped = run_layers(self.w, self.cfg, self.shard, self.cache, self.layers,
                                       x, segs, self.own_taps)
        taps = faults.stage_taps(self, taps_in, [tapped[t] for t in sorted(tapped)])
        if self.last and self.cfg.taps:
            self._check_taps()
        self.pending_kv = new_kv
        if not self.last:
            peer = self.pp_ranks[self.stage + 1]
            self.comm.send(x, peer)
            if taps.shape[1]:
                self.comm.send(taps, peer)
            self.timers["target"] += time.perf_counter() - t0
            return None, None, None
        logits = logits_of(self.w, x)
        # what the target predicts per row, and the logit it predicts it with, before any noise
        self.peaks, self.picks = logits.max(-1)
        if self.sim.inject == "noise" and self.rt.rank not in self.sources():
            g = torch.Generator().manual_seed(zlib.crc32(f"noise/{self.rt.rank}/{self.round}".encode()))
            logits = logits + self.sim.noise * torch.randn(logits.shape, generator=g, dtype=F64)
        self.timers["target"] += time.perf_counter() - t0
        return logits, x, taps

    def coin_salt(self, site: str) -> int:
        """-1 where `site`'s draws are the same on every rank (a replica's source; an engine
        whose rng is seeded alike on every rank, or a lockstep site, as check models it),
        else this rank (see `coins`)."""
        b = self.view.plan.behaviour
        if b.rng_is_float or site in b.lockstep_sites:
            return -1
        return -1 if self.rt.rank in self.sources() else self.rt.rank

    def rng_accept_site(self) -> str:
        """The decode accept site whose decisions draw coins."""
        return next((n for n, s in self.view.sites.items() if s.phase == "accept"
                     and any(d.nature == "rng" for d in s.decisions)), "")

    def _check_taps(self) -> None:
        """The drafter was trained on the residuals entering `taps`; it refuses others."""
        got = tuple(t for s in range(self.num_stages) for t in produced_taps(self.view.plan, s))
        if got != tuple(self.cfg.taps):
            raise LayoutMismatch(f"the drafter on stage {self.stage} (rank {self.rt.rank}) reads "
                                 f"taps {list(self.cfg.taps)} but the stages hand it the residuals "
                                 f"entering layers {list(got)} (pipeline.tap_ids: "
                                 f"{self.view.plan.pipeline.tap_ids}) at round {self.round}")

    def sources(self) -> set[int]:
        """Each replica's source: the first rank of the replica on the last stage."""
        groups = self.view.families["replica"].groups()
        return {max(g, key=lambda r: (self.view.stage_of(r), -r)) for g in groups}

    def drafter_ctx(self, hidden: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
        return taps if self.cfg.taps else hidden

    def commit_rows(self, rows: list[torch.Tensor], new_tokens: list[list[int]]) -> None:
        """Keep the K/V of each request's accepted rows and append its committed tokens."""
        t0 = time.perf_counter()
        for b, (r, toks) in enumerate(zip(rows, new_tokens)):
            slots = b * self.max_len + self.cache_len[b] + torch.arange(len(r))
            self.cache.write(self.pending_kv, r, slots)
            self.cache_len[b] += len(r)
            self.tokens[b].extend(toks)
            if self.last:  # the rows predicting the new tokens: the last len(toks) of `r`
                self.predicted[b].extend(self.picks[r[len(r) - len(toks):]].tolist())
                self.scores[b].extend(self.peaks[r[len(r) - len(toks):]].tolist())
        self.commits[self.round] = [len(t) for t in new_tokens]
        if self.round > 0:  # a decode round's accepted length, for `diff --acceptance`
            self.rt.record_acceptance(self.round, self.requests, self.commits[self.round])
        self.timers["commit"] += time.perf_counter() - t0

    def sample_or_argmax(self, logits: torch.Tensor, positions: list[int]) -> torch.Tensor:
        """The target's token per row: argmax, or an inverse-CDF draw with a per-position coin."""
        if not self.sampling:
            return logits.argmax(-1)
        probs = torch.softmax(logits / self.sim.temperature, -1)
        salt = self.coin_salt(f"{self.method}_target")
        u = torch.tensor([float(coins(self.sim.seed, q, pos, 1, salt)[0])
                          for q, pos in zip(self.requests, positions)], dtype=torch.float64)
        cdf = probs.cumsum(-1)
        return torch.searchsorted(cdf, (u * cdf[:, -1])[:, None]).squeeze(1).clamp(max=self.cfg.vocab - 1)
