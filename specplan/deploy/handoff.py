"""The KV handoff plan: for every decode rank, where its prompt KV comes from.

One entry per decode rank, as the decode engine's connector resolves it
(engines/<engine>/handoff.py): the prefill DP group, attention-TP, CP and PP ranks it pulls
from (numbered inside the prefill instance as its engine numbers them), the layers it receives
by global id (target layers, then draft layers), the slice of KV heads it holds, the responses
it waits for, and how many decode ranks the producer counts before it frees a block.

Requests pick their prefill DP group per request (SGLang: bootstrap_room % prefill dp); the
plan pairs decode DP group g with prefill DP group g % prefill dp, the group a request whose
room equals g reaches. The TP, CP and PP pairing inside the group is the same for every room.
So the pull is planned once per decode (attention-TP rank, stage), its rank class (`classes`);
the entries per rank are made from them only when read (compile and explain write them; check
reads the classes alone).

Worked example, 8 ranks: SGLang prefill tp 2 x pp 2 of 8 layers (4 ranks) -> decode tp 4:
    decode rank 3 pulls prefill TP rank 1 on stages [0, 1]: layers [[0, 4], [4, 8]], KV heads
    6..7 of 8, 2 responses; each prefill rank's blocks have 2 consumers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from itertools import product

from specplan.deploy.geometry import Geometry, geometry
from specplan.deploy.load import InstancePair
from specplan.engines import convention
from specplan.engines.handoff import Pull, Refusal, Rules, tp_ratio_ok
from specplan.mesh.digits import Digits


@dataclass(frozen=True)
class Handoff:
    rules: Rules
    prefill: Geometry
    decode: Geometry
    classes: dict[tuple[int, int], dict]  # decode (attention-TP rank, stage) -> its pull
    refusals: list[Refusal]
    consumers_seen: dict[tuple[int, int, int], int]  # prefill (tp, cp, pp) -> decode ranks reading it
    receipts: dict[int, Receipt]  # decode stage -> the layers written into it
    last_rank: dict[tuple[int, int], int]  # each class's last decode rank (rank order)

    @cached_property
    def entries(self) -> list[dict]:
        """One entry per decode rank: its prefill DP group and its class's pull."""
        if not self.classes:
            return []
        p, d = self.prefill, self.decode
        return [{"decode_rank": r, "prefill_dp_rank": d.dp_of[r] % p.dp, **self.classes[(tp, pp)]}
                for r, (tp, pp) in enumerate(zip(d.tp_of, d.pp_of))]


@dataclass(frozen=True)
class Receipt:
    target: tuple[tuple[int, int], ...]  # [start, end) ranges of target layers, by prefill id
    drafts: tuple[int, ...]  # draft-layer ids as the prefill sends them


def rules_for(engine: str, connector: str) -> Rules:
    """The decode instance's engine decides: its connector resolves where KV comes from
    (engines/<engine>/handoff.py)."""
    return convention(engine).handoff(connector)


def plan_handoff(dep: InstancePair) -> Handoff:
    rules = rules_for(dep.decode.spec.engine, dep.connector)
    p = geometry("prefill", dep.prefill.spec)
    d = geometry("decode", dep.decode.spec)
    refusals = _ratio_refusal(p, d) + rules.refusals(p, d)
    if refusals:
        return Handoff(rules, p, d, {}, refusals, {}, {}, {})
    receipts = {stage: receipt(rules, p, d, rules.pull(p, d, 0, stage).pp_ranks, stage)
                for stage in range(d.pp)}
    last = _classes(d)
    per_key = {key: _entry(rules, p, d, *key, receipts[key[1]]) for key in last}
    return Handoff(rules, p, d, per_key, [], _consumers(per_key), receipts, last)


def _classes(d: Geometry) -> dict[tuple[int, int], int]:
    """Every decode (attention-TP rank, stage) pair some rank holds, in order, with the last
    rank that holds it: all pairs when the two families' groups run along different digits of
    the rank (mesh/digits.py), as every engine lays them out; else read off the ranks."""
    mesh = d.mesh
    families = {f.name: f for f in mesh.families}
    digits = Digits.of(families, mesh.world_size) if d.axes.tp in families else None
    if digits is None or digits.group(d.axes.tp) & digits.group("pp"):
        last = {key: r for r, key in enumerate(zip(d.tp_of, d.pp_of))}
        return dict(sorted(last.items()))
    top = (mesh.num_worlds - 1) * mesh.world_size  # the tp and pp columns repeat per world
    out = {}
    for tp, pp in product(range(families[d.axes.tp].group_size), range(d.pp)):
        fixed = digits.member(d.axes.tp, tp) | digits.member("pp", pp)
        out[(tp, pp)] = top + sum(fixed.get(i, n - 1) * st for i, (n, st)
                                  in enumerate(zip(digits.sizes, digits.strides)))
    return out


def _ratio_refusal(p: Geometry, d: Geometry) -> list[Refusal]:
    if tp_ratio_ok(p, d):
        return []
    return [Refusal("tp-ratio", f"attention TP sizes prefill {p.attn_tp} and decode {d.attn_tp}: "
                    "neither divides the other, so no rank pairing exists (both engines assert "
                    "an integer ratio either way)")]


def _entry(rules, p: Geometry, d: Geometry, tp: int, stage: int, got: Receipt) -> dict:
    pull: Pull = rules.pull(p, d, tp, stage)
    offset, count = d.heads(tp)
    layers = [list(r) for r in got.target]
    if got.drafts:
        layers.append([got.drafts[0], got.drafts[-1] + 1])
    return {"prefill_tp_ranks": list(pull.tp_ranks), "prefill_cp_ranks": list(pull.cp_ranks),
            "prefill_pp_ranks": list(pull.pp_ranks), "layers": layers,
            "head_offset": offset, "head_count": count,
            "responses_expected": pull.responses, "consumers_per_source": pull.consumers}


def receipt(rules, p: Geometry, d: Geometry, stages: tuple[int, ...], stage: int) -> Receipt:
    """The global layer ids written into one decode stage.

    Positional connectors write a prefill stage's whole range where its first layer points;
    name-routed ones keep only names the decode stage holds. Draft layers come from the
    prefill's last stage under the ids that stage registers them with.
    """
    held = d.stages[stage]
    target = []
    for pp in stages:
        start, end = p.stages[pp]
        if rules.by_name:
            start, end = max(start, held[0]), min(end, held[1])
        if start < end:
            target.append((start, end))
    return Receipt(tuple(target), _sent_drafts(rules, p, d, stages, stage))


def _sent_drafts(rules, p: Geometry, d: Geometry, stages: tuple[int, ...], stage: int) -> tuple[int, ...]:
    if p.pp - 1 not in stages or not p.draft_layers:
        return ()
    if not rules.by_name:
        return p.draft_layers
    held = d.draft_layers if stage == d.pp - 1 else ()
    return tuple(i for i in p.draft_layers if i in held)


def _consumers(per_key: dict) -> dict[tuple[int, int, int], int]:
    """How many decode ranks of one decode DP group read each prefill (tp, cp, pp) rank."""
    seen: Counter = Counter()
    for e in per_key.values():
        seen.update(product(e["prefill_tp_ranks"], e["prefill_cp_ranks"], e["prefill_pp_ranks"]))
    return dict(seen)
