"""The KV handoff plan: for every decode rank, where its prompt KV comes from.

One entry per decode rank, as the decode engine's connector resolves it (rules.py): the
prefill DP group, attention-TP, CP and PP ranks it pulls from (numbered inside the prefill
instance as its engine numbers them), the layers it receives by global id (target layers,
then draft layers), the slice of KV heads it holds, the responses it waits for, and how many
decode ranks the producer counts before it frees a block.

Requests pick their prefill DP group per request (SGLang: bootstrap_room % prefill dp); the
plan pairs decode DP group g with prefill DP group g % prefill dp, the group a request whose
room equals g reaches. The TP, CP and PP pairing inside the group is the same for every room.

Worked example, 8 ranks: SGLang prefill tp 2 x pp 2 of 8 layers (4 ranks) -> decode tp 4:
    decode rank 3 pulls prefill TP rank 1 on stages [0, 1]: layers [[0, 4], [4, 8]], KV heads
    6..7 of 8, 2 responses; each prefill rank's blocks have 2 consumers.
"""

from __future__ import annotations

from collections import Counter
from itertools import product
from dataclasses import dataclass

from specplan.deploy.geometry import Geometry, geometry
from specplan.deploy.load import InstancePair
from specplan.deploy.rules import AXES, Pull, Refusal, rules_for, tp_ratio_ok


@dataclass(frozen=True)
class Handoff:
    rules: object
    prefill: Geometry
    decode: Geometry
    entries: list[dict]
    refusals: list[Refusal]
    consumers_seen: dict[tuple[int, int, int], int]  # prefill (tp, cp, pp) -> decode ranks reading it
    receipts: dict[int, Receipt]  # decode stage -> the layers written into it


@dataclass(frozen=True)
class Receipt:
    target: tuple[tuple[int, int], ...]  # [start, end) ranges of target layers, by prefill id
    drafts: tuple[int, ...]  # draft-layer ids as the prefill sends them


def plan_handoff(dep: InstancePair) -> Handoff:
    rules = rules_for(dep.decode.spec.engine, dep.connector)
    p = geometry("prefill", dep.prefill.spec, AXES[dep.prefill.spec.engine])
    d = geometry("decode", dep.decode.spec, AXES[dep.decode.spec.engine])
    refusals = _ratio_refusal(p, d) + rules.refusals(p, d)
    if refusals:
        return Handoff(rules, p, d, [], refusals, {}, {})
    receipts = {stage: receipt(rules, p, d, rules.pull(p, d, 0, stage).pp_ranks, stage)
                for stage in range(d.pp)}
    per_key = {key: _entry(rules, p, d, *key, receipts[key[1]])
               for key in sorted(set(zip(d.tp_of, d.pp_of)))}
    entries = [{"decode_rank": r, "prefill_dp_rank": d.dp_of[r] % p.dp, **per_key[(tp, pp)]}
               for r, (tp, pp) in enumerate(zip(d.tp_of, d.pp_of))]
    return Handoff(rules, p, d, entries, [], _consumers(per_key), receipts)


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
