"""The vLLM 0.33.0 plugin: its start-up check, its accept and its PP relay run the plan.

Entry point `vllm.general_plugins` -> `register`. vLLM calls it in every process (API server,
engine core, each worker), possibly several times: registration is idempotent, and with
SPECPLAN_PLAN unset it installs nothing and imports nothing; set, a plan whose accept or
draft decisions vLLM's tensors cannot carry is refused right there. docs/engines.md lists
each hook.

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
  generations (`req_idx_gen_np`) every call's batch identity reads (vllm_bridge.py).
- AsyncOutput.get_output: on the device path, the step's desync check (`rt.check_round()`
  when the flag's host copy shows a mismatch) where vLLM has waited for the step's output.

Worked example, 8 ranks, tp 2 x pp 2 x dp 2: vLLM builds tp [0,1]..[6,7], pp [0,2] [1,3]
[4,6] [5,7], dp [0,4] [1,5] [2,6] [3,7]; the plan's replicas are [0..3] and [4..7], sources
2 and 6: ranks 0..3 end every accept with rank 2's tokens, ranks 4..7 with rank 6's.
"""

from __future__ import annotations

import functools
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

from specplan.plugins.common import (ActivePlan, EngineRefused, activate, bind_engine,
                                     check_world, enabled, startup_check)

ENGINE = "vllm"
PS = "vllm.distributed.parallel_state"
SAMPLER = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"
PP_UTILS = "vllm.v1.worker.gpu.pp_utils"
ASYNC = "vllm.v1.worker.gpu.async_utils"
SPEC_DECODE = "vllm.v1.worker.gpu.spec_decode"
RUNNER = "vllm.v1.worker.gpu.model_runner"
# plan family -> the parallel_state global holding vLLM's coordinator (None: not built).
# "auto" (device on CUDA, host on a CPU), "host" or "device": forces the runtime's hot path
# (e.g. the device path on CPU ranks, to test the step's desync check without a GPU).
COORDINATORS = {"tp": "_TP", "dcp": "_DCP", "pcp": "_PCP", "pp": "_PP", "dp": "_DP", "ep": "_EP"}


def register() -> None:
    """vLLM's general-plugin entry point: nothing unless SPECPLAN_PLAN is set; idempotent."""
    if not enabled():
        return
    active = activate(ENGINE, _version())
    if active.hooks:
        return
    _check_sites(active)
    import vllm.distributed.parallel_state as ps

    state = VllmState(active)
    wrap(ps, "initialize_model_parallel", state.initialize_model_parallel)
    active.hooks.append(f"{PS}.initialize_model_parallel")


def _check_sites(active: ActivePlan) -> None:
    """Refuse, before vLLM starts, a plan whose sites vLLM's tensors cannot carry."""
    from specplan.plugins.vllm_codec import PlanMismatch, plan_sites

    try:
        plan_sites(active.plan)
    except PlanMismatch as exc:
        raise EngineRefused(f"plan {active.name!r} ({active.path}): {exc}") from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return "unknown"


def wrap(owner, name: str, hook) -> None:
    """owner.name = a function calling hook(original, *args); once (a wrapped one is kept)."""
    original = getattr(owner, name)
    if getattr(original, "__specplan__", False):
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return hook(original, *args, **kwargs)

    wrapper.__specplan__ = True
    setattr(owner, name, wrapper)


def _used(family: str, config) -> bool:
    """vLLM builds EP without a model config too ("for safety"); only a MoE model uses it."""
    if family != "ep":
        return True
    model = getattr(config, "model_config", None)
    return model is not None and bool(getattr(model, "is_moe", False))


def engine_spec(config) -> dict:
    """vLLM's speculative settings under the plan's keys (None: not known at this point)."""
    from specplan.ecosystem.flags import VLLM_METHODS

    sc = getattr(config, "speculative_config", None)
    if sc is None:
        return {"method": "none"}
    methods = {v: k for k, v in VLLM_METHODS.items()}
    k = sc.num_speculative_tokens
    return {"method": methods.get(sc.method, sc.method), "num_steps": k, "topk": 1,
            "num_draft_tokens": None if k is None else k + 1, "aux_layers": _aux_layers(sc),
            "draft_layer_ids": _draft_layer_ids(sc)}


def _aux_layers(sc):
    """Explicit EAGLE3 tap ids from the draft config (vLLM's default is set at model load)."""
    hf = getattr(getattr(sc, "draft_model_config", None), "hf_config", None)
    ids = getattr(hf, "eagle_aux_hidden_state_layer_ids", None)
    return None if ids is None else sorted(ids)


def _draft_layer_ids(sc):
    target, draft = getattr(sc, "target_model_config", None), getattr(sc, "draft_model_config", None)
    if target is None or draft is None or sc.method not in ("eagle", "eagle3"):
        return None
    first = target.get_total_num_hidden_layers()
    return [first + i for i in range(draft.hf_config.num_hidden_layers)]


@dataclass
class VllmState:
    """What the hooks share in one process: the plan, its runtime, the bridge to vLLM's tensors."""

    active: ActivePlan
    bridge: object = None
    timings: dict = field(default_factory=dict)

    # -- start-up --------------------------------------------------------------------------
    def initialize_model_parallel(self, original, *args, **kwargs):
        result = original(*args, **kwargs)
        import torch.distributed as dist
        import vllm.distributed.parallel_state as ps
        from vllm.config import get_current_vllm_config

        rank, world, t0 = dist.get_rank(), dist.get_world_size(), time.perf_counter()
        config = get_current_vllm_config()
        coordinators = {fam: c for fam, name in COORDINATORS.items()
                        if (c := getattr(ps, name, None)) is not None and _used(fam, config)}
        groups = {fam: [list(g) for g in c.group_ranks] for fam, c in coordinators.items()}
        self.active.engine_groups = groups
        try:
            check_world(self.active, world, rank)
            startup_check(self.active, groups, engine_spec(config), rank=rank)
            self._check_runner(config, rank)
        except EngineRefused:
            dist.barrier(group=ps.get_world_group().cpu_group)  # all refuse; none leaves early
            raise
        t1 = time.perf_counter()
        rt = bind_engine(self.active, rank=rank, world_size=world, device=ps.get_tp_group().device,
                         groups={fam: c.device_group for fam, c in coordinators.items()})
        self.timings = {"check": t1 - t0, "bind": time.perf_counter() - t1}
        self.active.startup_s = self.timings
        self._install_runner_hooks(rt, rank)
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

    def _install_runner_hooks(self, rt, rank: int) -> None:
        import importlib

        from specplan.plugins.vllm_bridge import PlanMismatch, VllmBridge

        pp_utils = importlib.import_module(PP_UTILS)
        sampler = importlib.import_module(SAMPLER)
        outputs = importlib.import_module(ASYNC)
        spec_decode = importlib.import_module(SPEC_DECODE)
        try:
            self.bridge = VllmBridge(rt, self.active.plan, need_mask=pp_utils.compute_need_sampled_mask,
                                     width=self.active.plan.speculative.num_steps + 1)
        except PlanMismatch as exc:
            raise EngineRefused(f"rank {rank}: plan {self.active.name!r} ({self.active.path}): {exc}") from None
        self.active.bridge, self.active.vllm = self.bridge, self
        hooks = ((sampler.RejectionSampler, "__call__", self.reject, SAMPLER),
                 (pp_utils.PPHandler, "broadcast", self.pp_broadcast, PP_UTILS),
                 (pp_utils.PPHandler, "receive", self.pp_receive, PP_UTILS),
                 (pp_utils.PPHandler, "broadcast_drafts", self.pp_broadcast_drafts, PP_UTILS),
                 (pp_utils.PPHandler, "on_req_idx_freed", self.pp_req_idx_freed, PP_UTILS),
                 (outputs.AsyncOutput, "get_output", self.get_output, ASYNC))
        for owner, name, hook, module in hooks:
            wrap(owner, name, hook)
            self._hooked(f"{module}.{owner.__name__}.{name}")
        # The runner binds init_speculator at its (lazy) import: the package's and, when the
        # runner module is already loaded, its own name.
        for module in (spec_decode, sys.modules.get(RUNNER)):
            if module is not None:
                wrap(module, "init_speculator", self.init_speculator)
        self._hooked(f"{SPEC_DECODE}.init_speculator")

    def _hooked(self, target: str) -> None:
        if target not in self.active.hooks:
            self.active.hooks.append(target)

    # -- the accept --------------------------------------------------------------------------
    def reject(self, original, sampler, logits, input_batch, *args, **kwargs):
        out = original(sampler, logits, input_batch, *args, **kwargs)
        self.bridge.accept_last(out.sampled_token_ids, out.num_sampled, out.num_rejected, input_batch)
        return out

    # -- the drafts ---------------------------------------------------------------------------
    def init_speculator(self, original, *args, **kwargs):
        """The last stage's speculator, its `propose` returning the plan's drafts."""
        speculator = original(*args, **kwargs)
        self.wrap_propose(speculator)
        return speculator

    def wrap_propose(self, speculator) -> None:
        propose = speculator.propose
        if getattr(propose, "__specplan__", False):
            return

        @functools.wraps(propose)
        def converged(input_batch, *args, **kwargs):
            drafts = propose(input_batch, *args, **kwargs)
            if kwargs.get("num_speculative_tokens", 1) > 0:
                self.bridge.converge_drafts(drafts, input_batch)
            return drafts

        converged.__specplan__ = True
        speculator.propose = converged

    # -- the step's desync check (device path) ------------------------------------------------
    def get_output(self, original, output):
        """After vLLM waited for the step's output copy: raise a recorded desync (rt.check_round)."""
        result = original(output)
        self.bridge.flags.check()
        return result

    # -- the PP relay --------------------------------------------------------------------------
    def pp_req_idx_freed(self, original, handler, req_idx):
        """vLLM bumps the state index's generation; the bridge reads it from this handler."""
        self.bridge.handler = handler
        return original(handler, req_idx)

    def pp_broadcast(self, original, handler, sampled, num_sampled, num_rejected, input_batch):
        self.bridge.handler = handler
        if self.bridge.need_mask(input_batch) is None:
            handler.sampled_tokens_broadcast = self.bridge.sent_this_step = False
            return
        handler.sampled_tokens_broadcast = True
        # On the main stream: a converge here writes the source's tokens back into the
        # tensors the runner postprocesses next.
        self.bridge.send_sampled(sampled, num_sampled, input_batch)

    def pp_broadcast_drafts(self, original, handler, draft_tokens):
        self.bridge.handler = handler
        if handler.sampled_tokens_broadcast:
            self.bridge.send_drafts(draft_tokens)

    def pp_receive(self, original, handler, input_batch, recv_drafts):
        import importlib

        self.bridge.handler = handler
        self.bridge.flags.check()  # earlier receives whose flag copy has landed
        mask = self.bridge.need_mask(input_batch)
        if mask is None:
            return False
        gen = handler.req_idx_gen_np[input_batch.idx_mapping_np]
        with _side_stream(handler):
            sampled, num, rejected = self.bridge.recv_sampled(input_batch, handler._sample_len(input_batch), mask)
            drafts = self.bridge.recv_drafts(input_batch.num_reqs, input_batch) if recv_drafts else None
            self.bridge.flags.snapshot("receive", self.bridge.rounds["accept"])
            event = _record(handler, (sampled, num, rejected, drafts))
        pending = importlib.import_module(PP_UTILS).PendingRecv
        handler.queue[-1] = pending(event, sampled, num, rejected, input_batch.idx_mapping,
                                    input_batch.idx_mapping_np, mask, gen, drafts)
        return bool(mask.all())


def _side_stream(handler):
    """vLLM's broadcast stream on CUDA (after the main stream's work); nothing on a CPU."""
    if handler.device.type != "cuda":
        return nullcontext()
    import torch

    handler.broadcast_stream.wait_stream(handler.main_stream)
    return torch.cuda.stream(handler.broadcast_stream)


def _record(handler, tensors):
    """The event the runner waits on pp_size steps later (None on a CPU: already complete)."""
    if handler.device.type != "cuda":
        return None
    for t in tensors:
        if t is not None:
            t.record_stream(handler.main_stream)
    return handler.broadcast_stream.record_event()
