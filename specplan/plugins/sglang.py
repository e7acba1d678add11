"""The SGLang 0.5.23 plugin: its start-up check and its SpecTpSync sites run the plan.

Entry point `sglang.srt.plugins` -> `register`. SGLang calls it in every process before the
engine starts and then applies the hooks (HookRegistry); docs/engines.md lists each hook.

- initialize_model_parallel (AROUND): while it runs, every init_model_parallel_group call is
  recorded (every group's ranks, by the coordinator it returns); after it returns,
  each family's groups are read off the coordinator SGLang stored for it (an alias such as
  attn_tp == tp is the same coordinator), compared with the plan together with the resolved
  speculative settings, and the plan's runtime is bound on the coordinators' device groups.
- dspark_verify.build_accept_outs (AROUND): the accept's three broadcasts (correct_len, bonus,
  cap_trim_lens) become the plan boundary's one guarded collective, over the plan's replica
  group from its source; the three SpecTpSync calls inside it are then skipped.
- SpecTpSync.sync / .enabled (AROUND): every other site converges as the plan says (its group
  and source, its policy): through the site's boundary when the engine hands the boundary's
  whole payload in one tensor, else one broadcast of that tensor over the plan's group.

Worked example, 4 ranks, tp 4, dp 2, DP-attention (attn_tp [0,1] [2,3]): SGLang's
DSPARK_ACCEPT_* broadcasts go over get_dp_tp_group(); the plugin's go over the plan's replica
[0,1] from 0 and [2,3] from 2, whatever group the SpecTpSync was built with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from specplan.plugins.common import (ActivePlan, EngineRefused, activate, bind_engine,
                                     check_world, enabled, startup_check)

ENGINE = "sglang"
PS = "sglang.srt.distributed.parallel_state"
SYNC = "sglang.srt.speculative.spec_tp_sync.SpecTpSync"
ACCEPT = "sglang.srt.speculative.dspark_components.dspark_verify.build_accept_outs"
# plan family -> the parallel_state global holding SGLang's coordinator for it (None: not built).
COORDINATORS = {"tp": "_TP", "attn_cp": "_ATTN_CP", "attn_tp": "_ATTN_TP", "moe_dp": "_MOE_DP",
                "moe_ep": "_MOE_EP", "moe_tp": "_MOE_TP", "pp": "_PP", "dcp": "_DCP"}
# build_accept_outs' tensors, in the order of the accept site's decisions in the plan.
ACCEPT_TENSORS = ("correct_len", "bonus", "cap_trim_lens")
# SPEC_KEYS -> the field of SGLang's resolved "spec" config bag. Aux layers and draft-layer
# ids live in the draft model's config, read after initialize_model_parallel: not compared.
SPEC_FIELDS = {"method": "speculative_algorithm", "num_steps": "speculative_num_steps",
               "topk": "speculative_eagle_topk", "num_draft_tokens": "speculative_num_draft_tokens"}


def register() -> None:
    """SGLang's plugin entry point: nothing at all unless SPECPLAN_PLAN is set; idempotent."""
    if not enabled():
        return
    active = activate(ENGINE, _version())
    if active.hooks:
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    state = SGLangState(active)
    hooks = ((f"{PS}.initialize_model_parallel", state.initialize_model_parallel),
             (f"{PS}.init_model_parallel_group", state.init_model_parallel_group),
             (ACCEPT, state.build_accept_outs), (f"{SYNC}.sync", state.sync),
             (f"{SYNC}.enabled", state.enabled))
    for target, hook in hooks:
        HookRegistry.register(target, hook, HookType.AROUND)
        active.hooks.append(target)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class SGLangState:
    """What the hooks share in one process: the plan, the groups SGLang built, the round."""

    active: ActivePlan
    created: dict[int, list[list[int]]] = field(default_factory=dict)  # id(coordinator) -> groups
    round: int = 0  # decode rounds accepted so far: the guard header's round
    _sites: dict = field(default_factory=dict)  # SpecTpSyncSite -> its plan site (or None)

    # -- start-up --------------------------------------------------------------------------
    def init_model_parallel_group(self, original, group_ranks, *args, **kwargs):
        coordinator = original(group_ranks, *args, **kwargs)
        self.created[id(coordinator)] = [list(g) for g in group_ranks]
        return coordinator

    def initialize_model_parallel(self, original, *args, **kwargs):
        result = original(*args, **kwargs)
        import torch.distributed as dist

        rank, world, t0 = dist.get_rank(), dist.get_world_size(), time.perf_counter()
        coordinators = self._coordinators()
        groups = {fam: self.created[id(c)] for fam, c in coordinators.items() if id(c) in self.created}
        self.active.engine_groups = groups
        try:
            check_world(self.active, world, rank)
            startup_check(self.active, groups, self._engine_spec(), rank=rank)
        except EngineRefused:
            # Every rank reaches the same verdict; meet first, so no rank leaves while a peer
            # still finishes SGLang's last group (its gloo pairs would be reset under it).
            import sglang.srt.distributed.parallel_state as ps

            dist.barrier(group=ps.get_world_group().cpu_group)
            raise
        t1 = time.perf_counter()
        bind_engine(self.active, rank=rank, world_size=world,
                    groups={fam: c.device_group for fam, c in coordinators.items()})
        self.active.startup_s = {"check": t1 - t0, "bind": time.perf_counter() - t1}
        return result

    def _coordinators(self) -> dict:
        import sglang.srt.distributed.parallel_state as ps

        found = {fam: getattr(ps, name, None) for fam, name in COORDINATORS.items()}
        return {fam: c for fam, c in found.items() if c is not None}

    def _engine_spec(self) -> dict:
        """The resolved speculative settings (SGLang's "spec" config bag), under SPEC_KEYS."""
        from specplan.ecosystem.flags import SGLANG_ALGORITHMS
        from sglang.srt.runtime_context import get_spec

        try:
            bag = get_spec()
            spec = {key: getattr(bag, name, None) for key, name in SPEC_FIELDS.items()}
        except (ValueError, RuntimeError):  # nothing published: a bare initialize_model_parallel
            return {}
        methods = {v: k for k, v in SGLANG_ALGORITHMS.items()}
        algo = spec["method"]
        spec["method"] = None if algo is None else methods.get(str(algo).upper(), str(algo).lower())
        return spec

    # -- converges ----------------------------------------------------------------------------
    def plan_site(self, site) -> dict | None:
        """The plan's site for a SpecTpSyncSite (by its slug), or None when the plan has none."""
        if site in self._sites:
            return self._sites[site]
        from specplan.ecosystem.flags import SITE_SLUGS

        slug = site.name.lower().replace("_", "-")
        sites = self.active.plan.site
        found = next((sites[name] for name, slugs in SITE_SLUGS.items()
                      if slug in slugs and name in sites), None)
        self._sites[site] = found
        return found

    def enabled(self, original, sync, site) -> bool:
        ps = self.plan_site(site)
        if ps is None or self.active.runtime is None:
            return original(sync, site)
        return ps.boundary is not None

    def sync(self, original, sync, site, values):
        ps, rt = self.plan_site(site), self.active.runtime
        if ps is None or rt is None:
            return original(sync, site, values)
        if ps.boundary is None:
            return values  # the plan does not converge this site (policy)
        boundary = rt.plan.boundary_of(ps.name)
        whole = _whole_payload(boundary, values)
        if whole is not None:
            out = rt.converge(ps.name, {whole: values}, round=self.round, live_rows=values.shape[0])
            return values.copy_(out[whole])
        import torch.distributed as dist

        source = rt.ranks[boundary.family][boundary.source_member]
        dist.broadcast(values, src=source, group=rt.groups[boundary.family])
        return values

    def build_accept_outs(self, original, *args, **kwargs):
        ps, rt = self.plan_site(kwargs["sync_site"]), self.active.runtime
        if ps is None or rt is None or kwargs.get("simulated_correct_len") is not None:
            return original(*args, **kwargs)  # simulated lengths: each tensor through `sync`
        if ps.boundary is not None:
            self._converge_accept(rt, ps, kwargs)
        kwargs["tp_sync"] = _Converged(kwargs["tp_sync"], kwargs["sync_site"])
        return original(*args, **kwargs)

    def _converge_accept(self, rt, ps: dict, kwargs: dict) -> None:
        """One guarded collective for the three tensors, copied back in place (as broadcasts do)."""
        import specplan.runtime.prepared as prepared

        names = [d.name for d in ps.decisions]
        tensors = [kwargs[t] for t in ACCEPT_TENSORS]
        values = {n: t.to(prepared.DTYPES[d.dtype]) for n, t, d in zip(names, tensors, ps.decisions)}
        out = rt.converge(ps.name, values, round=self.round, live_rows=tensors[0].shape[0])
        for name, t in zip(names, tensors):
            t.copy_(out[name])
        self.round += 1


def _whole_payload(boundary, values) -> str | None:
    """The decision `values` is, when it is the boundary's whole payload (one field, same dtype
    and rank); else None (the engine hands one part per call: DSpark's per-step drafts)."""
    if len(boundary.fields) != 1:
        return None
    f = boundary.fields[0]
    same = str(values.dtype).removeprefix("torch.") == f.dtype and values.dim() == len(f.shape) > 0
    return f.decision if same else None


class _Converged:
    """The SpecTpSync handed to the accept once the plan converged it: that site is a no-op."""

    def __init__(self, inner, site):
        self._inner, self._site = inner, site

    def sync(self, site, values):
        return values if site == self._site else self._inner.sync(site, values)

    def __getattr__(self, name):
        return getattr(self._inner, name)
