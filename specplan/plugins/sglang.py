"""The SGLang plugin (0.5.22 and 0.5.23, whose hooked functions have the same signatures;
engines/sglang/hooks.py refuses the older releases at start, naming each difference): its
start-up check and its SpecTpSync sites run the plan.

Entry point `sglang.srt.plugins` -> `register`. SGLang calls it in every process before the
engine starts and then applies the hooks (HookRegistry); docs/engines.md lists each hook.

- initialize_model_parallel (AROUND): while it runs, every init_model_parallel_group call is
  recorded (every group's ranks, by the coordinator it returns); after it returns,
  each family's groups are read off the coordinator SGLang stored for it (an alias such as
  attn_tp == tp is the same coordinator), compared with the plan together with the resolved
  speculative settings, and the plan's runtime is bound on the coordinators' device groups.
- SpecTpSync.sync / .enabled (AROUND): every site converges as the plan says (its group, its
  source, its policy) as its boundary's one guarded collective; a payload SGLang hands over
  several calls (DSpark's and DFlash's accepts) is buffered to the last call.
- EagleDraftWorker._draft_extend_for_prefill, eagle_worker_common.build_eagle_verify_input,
  EagleDraftWorker._draft_extend_for_decode (AROUND, only for a plan that converges them): the
  EAGLE-family target (first token), draft and draft-extend sites (sglang_draft.py).
- NGRAMWorker._prepare_draft_tokens (AROUND, only for a plan that converges `ngram_draft`):
  NGRAM's host-side drafts and tree mask, made per rank from its own corpus (sglang_draft.py).
- eagle_utils.eagle_sample, GroupCoordinator.broadcast, DSparkVerifyPlanner._schedule_verify_lens,
  dspark_draft.draft_markov_block (AROUND): the payloads SpecTpSync does not hand whole
  (sglang_sites.py says how each becomes one boundary).
- DSparkWorkerV2 / DFlashWorkerV2.forward_batch_generation (AROUND): the batch's request ids
  and row generations, for the batch identity of every converge the forward issues.
- SchedulerPPMixin._pp_prepare_tensor_dict / _pp_prep_batch_result (AROUND, pp > 1 only): the
  plan's relays carried in SGLang's own PP output messages (sglang_pp.py).
- SchedulerBatchResultProcessor.process_batch_result_decode / _prefill (AROUND): the round's
  one desync check on the device path (`rt.check_round()`), where SGLang already waits for the
  round's results and before it commits them.

Worked example, 4 ranks, tp 4, dp 2, DP-attention (attn_tp [0,1] [2,3]): SGLang's
DSPARK_ACCEPT_* broadcasts go over get_dp_tp_group(); the plugin's go over the plan's replica
[0,1] from 0 and [2,3] from 2, whatever group the SpecTpSync was built with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specplan.plugins.common import (ENV_PLAN, ActivePlan, EngineRefused, activate, bind_engine,
                                     check_world, enabled, hooked, log_bound,
                                     refuse_unreached_gates, startup_check)
from specplan.plugins.sglang_sites import SiteHooks

if TYPE_CHECKING:
    from specplan.plugins.sglang_pp import PPRelay  # imported when PP is planned, not before
from specplan.engines.sglang.hooks import table
from specplan.plugins.roles import declared, serves

ENGINE = "sglang"
# plan family -> the parallel_state global holding SGLang's coordinator for it (None: not built).
COORDINATORS = {"tp": "_TP", "attn_cp": "_ATTN_CP", "attn_tp": "_ATTN_TP", "moe_dp": "_MOE_DP",
                "moe_ep": "_MOE_EP", "moe_tp": "_MOE_TP", "pp": "_PP", "dcp": "_DCP"}
# SPEC_KEYS -> the field of SGLang's resolved "spec" config bag. Aux layers and draft-layer
# ids live in the draft model's config, read after initialize_model_parallel: not compared.
SPEC_FIELDS = {"method": "speculative_algorithm", "num_steps": "speculative_num_steps",
               "topk": "speculative_eagle_topk", "num_draft_tokens": "speculative_num_draft_tokens"}


# The gates (engines/sglang/gates.py) this plugin reaches: the start-up memory readings through
# the SpecTpSync.available_memory_gb hook (a MIN over the plan's family), the DP-attention round
# gates through SGLang's own token-count all-gather over tp, which is the plan's group for them.
REACHED_GATES = frozenset({"dspark_draft_graph_mem", "dflash_draft_graph_mem", "dp_padding_mode",
                           "dp_idle_forward", "target_graph", "eagle_draft_graph",
                           "eagle_adaptive_steps"})


def register() -> None:
    """SGLang's plugin entry point: nothing at all unless SPECPLAN_PLAN is set; idempotent."""
    if not enabled():
        return
    active = activate(ENGINE, _version())
    assert active is not None  # enabled(): SPECPLAN_PLAN is set
    if active.hooks:
        return
    refuse_stage_spanning_sites(active)
    refuse_unreached_gates(active, REACHED_GATES)
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    state = active.state = SGLangState(active)
    # every body SGLangState declares (`@serves(role)`), at the newest release's targets
    release = table()
    hooks = [(release.target(role), getattr(state, name)) for role, _, name in declared(SGLangState)]
    from specplan.plugins.sglang_draft import draft_hooks  # EAGLE-family and NGRAM draft sites
    from specplan.plugins.sglang_pp import pp_hooks  # the plan's relays in SGLang's PP messages

    for target, hook in (*hooks, *draft_hooks(state), *pp_hooks(state)):
        HookRegistry.register(target, hook, HookType.AROUND)
        hooked(active, target)


def refuse_stage_spanning_sites(active: ActivePlan) -> None:
    """Refuse a plan whose decode converges span pipeline stages, before it can hang.

    Under SGLang's pipeline parallelism only the last stage drafts, verifies and accepts, and
    the earlier stages learn the results from SGLang's own PP relay (sglang_pp.py carries the
    plan's relays in it). A boundary over the whole replica (`pipeline.relay: broadcast`)
    would wait for earlier-stage ranks that never reach the site, so such a plan is refused
    at start-up; SGLang's default plan relays `ring` (engines/sglang/convention.py)."""
    plan = active.plan
    if plan.pp == 1:
        return
    spanning = sorted({s.name for s in plan.sites if s.round == "decode" and s.converge
                       and not s.trivial and s.family == "replica"})
    if spanning:
        raise EngineRefused(
            f"{ENV_PLAN}={active.path}: plan {plan.name!r} has pp {plan.pp} and converges "
            f"{', '.join(spanning)} over the whole replica (pipeline.relay: broadcast), but SGLang "
            "runs them on the last stage only and relays the results itself, so the earlier "
            "stages would never join and the first round would hang: compile the spec with "
            "pipeline.relay: ring (SGLang's default), whose relays ride SGLang's PP messages")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sglang")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class SGLangState(SiteHooks):
    """What the hooks share in one process: the plan, the groups SGLang built, the round."""

    active: ActivePlan
    created: dict[int, list[list[int]]] = field(default_factory=dict)  # id(coordinator) -> groups
    round: int = 0  # decode rounds accepted so far: the guard header's round
    pp: PPRelay | None = None  # sglang_pp.PPRelay under pipeline parallelism (records converges to relay)

    def __post_init__(self) -> None:
        self._init_sites()

    # -- start-up --------------------------------------------------------------------------
    @serves("group")
    def init_model_parallel_group(self, original, group_ranks, *args, **kwargs):
        coordinator = original(group_ranks, *args, **kwargs)
        self.created[id(coordinator)] = [list(g) for g in group_ranks]
        return coordinator

    @serves("world")
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
        # The runtime's device is SGLang's own (its TP coordinator's: cuda:<local rank> on a GPU,
        # the CPU under gloo), not the plan's device name.
        bind_engine(self.active, rank=rank, world_size=world,
                    groups={fam: c.device_group for fam, c in coordinators.items()},
                    device=_tp_device())
        self.active.startup_s = {"check": t1 - t0, "bind": time.perf_counter() - t1}
        log_bound(self.active, rank)
        return result

    # -- the round's desync check ------------------------------------------------------------
    @serves("decode_result")
    @serves("prefill_result")
    def check_result(self, original, processor, batch, result, *args, **kwargs):
        """SchedulerBatchResultProcessor.process_batch_result_decode / _prefill: on the device
        path, `rt.check_round()` right after SGLang's own wait for the round's result copy
        (its first step, done here first: the forward and its converges have run) and before
        SGLang commits anything of the round. The host path raised within the round already."""
        rt = self.active.runtime
        if rt is not None and rt.hot_path == "device":
            done = getattr(result, "copy_done", None)
            if done is not None:
                done.synchronize()
            rt.check_round()
        return original(processor, batch, result, *args, **kwargs)

    def _coordinators(self) -> dict:
        import sglang.srt.distributed.parallel_state as ps

        found = {fam: getattr(ps, name, None) for fam, name in COORDINATORS.items()}
        return {fam: c for fam, c in found.items() if c is not None}

    def _engine_spec(self) -> dict:
        """The resolved speculative settings (SGLang's "spec" config bag), under SPEC_KEYS."""
        from specplan.engines.sglang.methods import ROWS
        from sglang.srt.runtime_context import get_spec

        try:
            bag = get_spec()
            spec = {key: getattr(bag, name, None) for key, name in SPEC_FIELDS.items()}
        except (ValueError, RuntimeError):  # nothing published: a bare initialize_model_parallel
            return {}
        algo = spec["method"]
        named = None if algo is None else ROWS.named(str(algo).upper(), aliases=False)
        spec["method"] = None if algo is None else named or str(algo).lower()
        return spec


def _tp_device():
    """The device SGLang's TP coordinator runs on (cuda:<local rank>, or the CPU under gloo)."""
    import sglang.srt.distributed.parallel_state as ps

    return ps.get_tp_group().device
