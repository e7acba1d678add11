"""The SGLang plugin's converge hooks: each site the plan converges runs as its boundary's one
guarded collective, over the plan's group, from the plan's source.

SGLang hands a boundary's payload in one of four ways; each becomes one `rt.converge`:
- whole, in one `SpecTpSync.sync` call (DSPARK_TARGET, DFLASH_TARGET, DFLASH_ACCEPT_GREEDY);
- in several consecutive `sync` calls of one site (DFlash's accept: accept_len, then bonus;
  DSpark's accept inside build_accept_outs: correct_len, bonus, cap_trim_lens). The calls
  before the last are buffered (the tensor is kept, nothing is sent); the last call issues
  the boundary and writes every buffered tensor back in place, as SGLang's broadcasts would;
- partly in the calling frame (DSPARK_PLAN: `verify_lens` at the call, the budget it was
  planned under as `_schedule_verify_lens`' `budget` argument, hooked for it);
- once per step of a block (DSPARK_DRAFT: one [bs] column per Markov step): the per-step
  calls are deferred while `draft_markov_block` runs and its stacked [bs, gamma] result is
  converged once when it returns;
and one SGLang converges outside SpecTpSync: EAGLE's accept (`eagle_sample`: predict,
accept_index, num_correct_drafts), converged when eagle_sample returns, with SGLang's own
three broadcasts inside it skipped.

Every guarded call carries the round's rows (batch identity, docs/batch-identity.md): request
ids `reqs[i].rid` and each row's generation in the request-to-token pool
(`req_to_token_pool.req_generation[req_pool_indices_cpu]`, which ReqToTokenPool.alloc bumps
each time it hands a row out), read when the batch is launched, right after it was scheduled.
eagle_sample has its batch; DSpark's and DFlash's converges run inside their worker's
`forward_batch_generation`, whose batch the plugin notes for the round (`worker_forward`).

A payload the plugin cannot complete (a call it has no decision for, or the frame's budget
missing) falls back to one broadcast per call over the plan's group from the plan's source:
the right values, without the guard header. docs/engines.md lists every case.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from specplan.plugins.common import fit_rows, wants_identity
from specplan.plugins.roles import serves

if TYPE_CHECKING:
    from specplan.plugins.common import ActivePlan


class Relays(Protocol):
    """What the converge half asks of sglang_pp.PPRelay (imported only under PP)."""

    def record(self, site: str, round_: int, values: dict, live_rows: int, requests: object) -> None: ...

# Inside a hooked eagle_sample: SGLang's own broadcasts of its accept are skipped (the plan's
# boundary converges the same three tensors when eagle_sample returns).
_ENGINE_ACCEPT_BROADCAST_SKIPPED = contextvars.ContextVar("specplan_skip_accept_broadcast", default=False)

# SGLang site slug -> the decisions its sync calls hand, in call order (the engine's code).
CALLS = {
    "dflash-accept-sample": ("accept_len", "bonus"),  # dflash_worker_v2._accept_block
    "dflash-selector": ("accept_len", "bonus"),  # same, selector sampling
    "dspark-plan": ("verify_lens",),  # dspark_planner._schedule_verify_lens
    "dspark-accept-greedy": ("correct_len", "bonus", "cap_trim_lens"),  # build_accept_outs
    "dspark-accept-sample": ("correct_len", "bonus", "cap_trim_lens"),
    "dspark-accept-graph": ("correct_len", "bonus", "cap_trim_lens"),
}
FRAME_BUDGET = "verify_budget"  # the decision `_schedule_verify_lens(budget=)` holds
EAGLE_ACCEPT = ("predict", "accept_index", "num_correct_drafts")  # eagle_sample's, plan order


# What available_memory_gb is handed for this rank's own reading: a one-rank group, so SGLang's
# get_available_gpu_memory reads locally and issues no collective.
_ONE_RANK = type("OneRank", (), {"world_size": 1, "cpu_group": None})()


def slug_of(site: Any) -> str:  # SGLang's SpecTpSyncSite (an engine enum member, untyped)
    return site.name.lower().replace("_", "-")


@dataclass
class _Payload:
    """A boundary's decisions handed so far this round: decision -> the engine's tensor."""

    tensors: dict = field(default_factory=dict)
    made: set = field(default_factory=set)  # decisions the plugin made (not the engine's tensors)


class SiteHooks:
    """The converge half of SGLangState (which holds `active` and `round`)."""

    active: ActivePlan
    round: int
    pp: Relays | None

    def _init_sites(self) -> None:
        self._sites: dict = {}  # slug -> its plan site (or None)
        self._payloads: dict[int, _Payload] = {}  # boundary id -> what the engine handed so far
        self._deferred: set[str] = set()  # plan sites whose per-step calls a block hook converges
        self.skipped_engine_broadcasts = 0  # SGLang's own accept broadcasts the plugin replaced
        self.last_budget = None  # the converged verify budget (a device scalar), DSPARK_PLAN
        self.rows = None  # the running worker forward's (request ids, generations), or None

    # -- which plan site -------------------------------------------------------------------
    def plan_site(self, site):
        """The plan's site for a SpecTpSyncSite or its slug, or None when the plan has none."""
        slug = site if isinstance(site, str) else slug_of(site)
        if slug not in self._sites:
            from specplan.engines.sglang.spec_tp_sync import SITE_SLUGS

            sites = self.active.plan.site
            self._sites[slug] = next((sites[name] for name, slugs in SITE_SLUGS.items()
                                      if slug in slugs and name in sites), None)
        return self._sites[slug]

    def eagle_site(self):
        """The plan's `<method>_accept` when it carries eagle_sample's three decisions."""
        if "<accept>" not in self._sites:
            ps = self.active.plan.site.get(f"{self.active.plan.speculative.method}_accept")
            ok = ps is not None and tuple(d.name for d in ps.decisions) == EAGLE_ACCEPT
            self._sites["<accept>"] = ps if ok else None
        return self._sites["<accept>"]

    # -- SpecTpSync ------------------------------------------------------------------------
    @serves("spec_tp_sync_enabled")
    def enabled(self, original, sync, site) -> bool:
        ps = self.plan_site(site)
        if ps is None or self.active.runtime is None:
            return original(sync, site)
        return ps.boundary is not None

    @serves("available_memory")
    def available_memory_gb(self, original, sync, site, device, gpu_id, *, group):
        """A start-up free-memory reading (DSPARK_MEM, DFLASH_MEM) that gates the draft's graph
        capture: this rank's own reading, then the plan's MIN over the site's family, which
        specplan widens to the draft's graph group (passes/plan_gates.py), not the group
        SpecTpSync was built on (attention TP under DP-attention, where it drops every site)."""
        ps, rt = self.plan_site(site), self.active.runtime
        if ps is None or rt is None:
            return original(sync, site, device, gpu_id, group=group)
        own = original(sync, site, device, gpu_id, group=_ONE_RANK)  # no collective: this rank's
        if ps.boundary is None:
            return own
        import torch

        out = rt.converge(ps.name, {"free_mem_gb": torch.tensor(own, dtype=torch.float32)},
                          round=0, live_rows=1)
        return float(out["free_mem_gb"])

    @serves("spec_tp_sync")
    def sync(self, original, sync, site, values):
        ps, rt = self.plan_site(site), self.active.runtime
        if ps is None or rt is None:
            return original(sync, site, values)
        if ps.boundary is None or ps.name in self._deferred:
            return values  # policy off, or a block hook converges the whole block at its end
        boundary = rt.plan.boundary_of(ps.name)
        payload = self._payloads.setdefault(boundary.id, _Payload())
        name = _decision_of(boundary, ps.name, slug_of(site), values, payload)
        if name is None:
            return _broadcast(rt, boundary, values)
        payload.tensors[name] = values
        if len(payload.tensors) == len(boundary.fields):
            self._issue(rt, boundary, ps.name, payload, live_rows=values.shape[0])
        elif _last_call(slug_of(site), name):  # the engine handed all it has: no boundary
            for t in self._payloads.pop(boundary.id).tensors.values():
                _broadcast(rt, boundary, t)
        return values

    def _issue(self, rt, boundary, site: str, payload: _Payload, *, live_rows: int, rows=None):
        """The boundary's one guarded collective; the engine's tensors get the source's values.
        `rows`: the call's (request ids, generations); None: the running worker forward's."""
        import specplan.runtime.prepared as prepared

        self._payloads.pop(boundary.id, None)
        values = {f.decision: payload.tensors[f.decision].to(prepared.DTYPES[f.dtype]) for f in boundary.fields}
        requests = fit_rows(self.rows if rows is None else rows, live_rows)
        out = rt.converge(site, values, round=self.round, live_rows=live_rows, requests=requests)
        if self.pp is not None:  # pipeline parallel: the relay carries what was converged
            for s in boundary.sites:
                mine = {f.decision: out[f.decision] for f in boundary.fields if f.site == s}
                self.pp.record(s, self.round, mine, live_rows, requests)
        for name, t in payload.tensors.items():
            if name not in payload.made:
                t.copy_(out[name])
        if FRAME_BUDGET in out:
            self.last_budget = out[FRAME_BUDGET]
        if any(rt.plan.sites[s].phase == "accept" for s in boundary.sites):
            self.round += 1  # an accept closes the round: the guard header's round advances
        return out

    # -- the round's rows -------------------------------------------------------------------
    @serves("dspark_forward")
    @serves("dflash_forward")
    def worker_forward(self, original, worker, batch, *args, **kwargs):
        """DSparkWorkerV2 / DFlashWorkerV2.forward_batch_generation: its batch's rows are the
        rows of every converge the forward issues (their accept functions get no batch)."""
        rt = self.active.runtime
        if rt is None or not wants_identity(rt):
            return original(worker, batch, *args, **kwargs)
        outer, self.rows = self.rows, batch_rows(batch)
        try:
            return original(worker, batch, *args, **kwargs)
        finally:
            self.rows = outer

    # -- frames that hold part of a payload ----------------------------------------------------
    @serves("verify_lens")
    def schedule_verify_lens(self, original, planner, *args, **kwargs):
        """DSparkVerifyPlanner._schedule_verify_lens: its `budget` joins verify_lens' boundary."""
        import torch

        ps, rt, budget = self.plan_site("dspark-plan"), self.active.runtime, kwargs.get("budget")
        if ps is None or rt is None or ps.boundary is None or budget is None:
            return original(planner, *args, **kwargs)
        boundary = rt.plan.boundary_of(ps.name)
        if FRAME_BUDGET not in boundary.decisions:
            return original(planner, *args, **kwargs)
        payload = self._payloads[boundary.id] = _Payload()
        payload.tensors[FRAME_BUDGET] = torch.tensor(int(budget), dtype=torch.int32, device=kwargs.get("device"))
        payload.made.add(FRAME_BUDGET)
        try:
            return original(planner, *args, **kwargs)
        finally:
            self._payloads.pop(boundary.id, None)  # returned before its sync: nothing to send

    @serves("markov_draft")
    def draft_markov_block(self, original, *args, **kwargs):
        """dspark_draft.draft_markov_block: the gamma per-step DSPARK_DRAFT calls become the
        plan's one draft_tokens boundary, issued when the block returns."""
        ps, rt = self.plan_site("dspark-draft"), self.active.runtime
        if ps is None or rt is None or ps.boundary is None:
            return original(*args, **kwargs)
        boundary = rt.plan.boundary_of(ps.name)
        if boundary.decisions != ("draft_tokens",):
            return original(*args, **kwargs)  # fused with other sites: per-step broadcasts
        self._deferred.add(ps.name)
        try:
            tokens, logits = original(*args, **kwargs)
        finally:
            self._deferred.discard(ps.name)
        self._issue(rt, boundary, ps.name, _Payload({"draft_tokens": tokens}), live_rows=tokens.shape[0])
        return tokens, logits

    # -- EAGLE's accept (no SpecTpSync site) ----------------------------------------------------
    @serves("accept")
    def eagle_sample(self, original, verify_input, batch, *args, **kwargs):
        """eagle_utils.eagle_sample -> (predict, accept_lens, accept_index): one guarded
        collective of the plan's accept boundary; SGLang's three broadcasts inside are skipped."""
        ps, rt = self.eagle_site(), self.active.runtime
        if ps is None or rt is None or ps.boundary is None or batch.forward_mode.is_idle():
            return original(verify_input, batch, *args, **kwargs)
        token = _ENGINE_ACCEPT_BROADCAST_SKIPPED.set(True)
        try:
            predict, accept_lens, accept_index = original(verify_input, batch, *args, **kwargs)
        finally:
            _ENGINE_ACCEPT_BROADCAST_SKIPPED.reset(token)
        boundary = rt.plan.boundary_of(ps.name)
        if boundary.decisions != EAGLE_ACCEPT:
            raise RuntimeError(f"plan site {ps.name} is fused with {boundary.label}: the SGLang plugin "
                               "converges eagle_sample's accept only as a boundary of its own")
        correct = accept_lens - 1
        rows = batch_rows(batch) if wants_identity(rt) else None
        payload = _Payload({"predict": predict, "accept_index": accept_index, "num_correct_drafts": correct},
                           {"num_correct_drafts"})  # accept_lens is written from it below
        rnd = self.round
        out = self._issue(rt, boundary, ps.name, payload, live_rows=accept_lens.shape[0], rows=rows)
        accept_lens.copy_(out["num_correct_drafts"] + 1)
        rt.record_acceptance(rnd, fit_rows(rows, accept_lens.shape[0]), accept_lens)
        return predict, accept_lens, accept_index

    @serves("group_broadcast")
    def group_broadcast(self, original, group, tensor, *args, **kwargs):
        """GroupCoordinator.broadcast: skipped only inside a hooked eagle_sample (one context
        variable read on every other call)."""
        if _ENGINE_ACCEPT_BROADCAST_SKIPPED.get():
            self.skipped_engine_broadcasts += 1
            return tensor
        return original(group, tensor, *args, **kwargs)


def batch_rows(batch: Any) -> tuple[list, list | None] | None:
    """A ScheduleBatch's rows as (request ids, generations), in row order, read now: `rid` per
    request and the generation of its request-to-token pool row. None without requests; the
    generations None (0) without a pool."""
    reqs = getattr(batch, "reqs", None)
    if not reqs:
        return None
    ids = [r.rid for r in reqs]
    slots = getattr(batch, "req_pool_indices_cpu", None)
    generation = getattr(getattr(batch, "req_to_token_pool", None), "req_generation", None)
    if slots is None or generation is None:
        return ids, None
    return ids, generation[slots].tolist()


def _decision_of(boundary, site: str, slug: str, values, payload: _Payload) -> str | None:
    """Which of the boundary's decisions `values` is: the next one of CALLS[slug] not handed
    yet (a plan decision of this site, named as SGLang's variable or with the site's suffix),
    or the site's only decision of the same dtype and rank; None when none fits."""
    mine = [f for f in boundary.fields if f.site == site and f.decision not in payload.tensors]
    for base in CALLS.get(slug, ()):
        hit = next((f for f in mine if f.decision == base or f.decision.startswith(base + "_")), None)
        if hit is not None:
            return hit.decision if _fits(hit, values) else None
    fits = [f for f in mine if _fits(f, values)]
    return fits[0].decision if len(mine) == 1 and fits else None


def _fits(f, values) -> bool:
    return str(values.dtype).removeprefix("torch.") == f.dtype and values.dim() == len(f.shape)


def _last_call(slug: str, name: str) -> bool:
    calls = CALLS.get(slug)
    return not calls or name == calls[-1] or name.startswith(calls[-1] + "_")


def _broadcast(rt, boundary, values):
    """The fallback: one plain broadcast over the plan's group from the plan's source."""
    import torch.distributed as dist

    source = rt.ranks[boundary.family][boundary.source_member]
    dist.broadcast(values, src=source, group=rt.groups[boundary.family])
    return values
