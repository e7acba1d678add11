"""Rank programs for the plugin's guards on vLLM's real code (tests/engines/test_vllm_guard.py):
every hook's target checked against its release's table, an exception in any hook ending the
process, and the run-time checks of the seed's two silent corruptions (plugins/vllm_pp.py).

Run by tests/ranks.py's launch through vllm_workers.main (the same RESULT / REFUSED / ERROR
protocol); the stand-ins are vllm_workers' (batch, sampler state, PPHandler without streams).
"""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace as NS

import vllm_workers
from vllm_workers import K, _batch, _handler, _run_step, receive


class Exited(BaseException):
    """os._exit, intercepted: one process then forces every hook in turn."""


def _start(tp: str, pp: str, dp: str, speculative: str):
    import vllm_harness

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative))
    return ps, next(iter(common._ACTIVE.values()))


def hook_calls(state) -> dict:
    """For each hooked target: a call of the installed (wrapped) vLLM function."""
    import importlib

    from specplan.engines.vllm.hooks import PP_UTILS

    pp = importlib.import_module(PP_UTILS)
    h = NS()
    calls = {}
    for hook in state.release.hooks:
        if not hook.wrapped:
            continue
        if hook.role == "propose":
            spec = NS(propose=lambda input_batch, *a, **k: None)
            state.wrap_propose(spec)
            calls[hook.target] = lambda spec=spec: spec.propose(NS(), num_speculative_tokens=K)
            continue
        owner, name = importlib.import_module(hook.module), hook.qualname
        for part in name.split(".")[:-1]:
            owner = getattr(owner, part)
        fn = getattr(owner, name.split(".")[-1])
        nargs = len(hook.signature.strip("()").split(",")) if hook.signature != "()" else 0
        first = (h,) if "self" in hook.signature else ()
        calls[hook.target] = lambda fn=fn, first=first, n=nargs: fn(*first, *([None] * (n - len(first))))
    assert pp.PPHandler.receive.__specplan__  # the class's own attribute is the wrapper
    return calls


def forced_exceptions(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """Every hook's body replaced by one that raises: the guard's exit code and line per target;
    then an exception from vLLM's own function, which passes through the wrapper unchanged."""
    from specplan.plugins import vllm_guard

    ps, active = _start(tp, pp, dp, speculative)
    state = active.vllm
    codes = []
    vllm_guard.os = NS(_exit=lambda code: (codes.append(code), (_ for _ in ()).throw(Exited())))
    out = {}
    for target, call in hook_calls(state).items():
        from specplan.plugins.roles import body_for

        serves = body_for(type(state), next(h for h in state.release.hooks if h.target == target))

        def boom(*args, **kwargs):
            raise RuntimeError(f"forced in {serves}")

        setattr(state, serves, boom)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                call()
            out[target] = {"exited": None}
        except Exited:
            line = next(l for l in err.getvalue().splitlines() if l.startswith("specplan: "))
            out[target] = {"exited": codes[-1], "line": line}
        finally:
            delattr(state, serves)
    from vllm.v1.worker.gpu.pp_utils import PPHandler

    try:  # vLLM's own on_req_idx_freed on a handler without its counter: vLLM's error
        PPHandler.on_req_idx_freed(NS(), 1)
    except AttributeError as exc:
        out["engine_error"] = f"{type(exc).__name__}: {exc}"
    vllm_guard.os = __import__("os")
    return out


def forced_mismatches(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """Every table entry with its signature changed, checked against the real function: the
    refusal each gives (vLLM started with the right table first)."""
    from dataclasses import replace

    from specplan.plugins import EngineRefused
    from specplan.plugins.vllm_guard import locate

    ps, active = _start(tp, pp, dp, speculative)
    state, out = active.vllm, {}
    for hook in state.release.hooks:
        try:
            locate(replace(hook, signature="(self, other)"), state.version, state.release)
            out[hook.target] = None
        except EngineRefused as exc:
            out[hook.target] = str(exc)
    missing = replace(state.release.hooks[2], qualname="PPHandler.gone")
    try:
        locate(missing, state.version, state.release)
    except EngineRefused as exc:
        out["missing"] = str(exc)
    return out


def table(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """Start with another release's table (`fault` its version) or as another vLLM version
    (`fault` "as:<version>"): refused or started."""
    import specplan.plugins.vllm as plugin
    from specplan.engines.vllm.hooks import nearest_release

    if fault.startswith("as:"):
        plugin.engine_version = lambda: fault[3:]
    else:
        plugin.nearest_release = lambda version: nearest_release(fault)
    ps, active = _start(tp, pp, dp, speculative)
    return {"hooks": len(active.hooks), "release": active.vllm.release.version,
            "version": active.vllm.version}


def entry(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """tp 1 x pp 2: stage 0 receives step 0's entry, request req-1 finishes (state index 1
    freed), and the entry is consumed pp_size steps later. `fault` "stale-write": vLLM's own
    snapshot of the generations is refreshed first, so its filter writes row 1 (the seed's stale
    drafts): the plugin's check ends stage 0."""
    import torch
    import vllm.utils.torch_utils as torch_utils

    # The wheel's platform is unspecified here (no GPU): vLLM's filter stages its mapping in
    # pinned memory, which a CPU build's platform turns off.
    torch_utils.PIN_MEMORY = False  # 0.33.0 reads the constant, 0.32 the function
    torch_utils.is_pin_memory_available = lambda: False
    ps, active = _start(tp, pp, dp, speculative)
    handler = _handler(ps, int(pp))
    handler.main_stream = NS(wait_event=lambda event: None)  # CUDA's; a CPU entry is complete
    out = _run_step(ps, int(pp), active, handler=handler)
    if handler.is_last_rank:
        return out
    table_ = torch.full((8, K), 7, dtype=torch.int64)  # RequestState.draft_tokens
    prev = _prev(handler, table_)
    assert prev is None  # the placeholder of the step before
    handler.on_req_idx_freed(1)
    got = handler.queue[0]
    if fault == "stale-write":
        got.gen_at_receive_np[:] = handler.req_idx_gen_np[got.idx_mapping_np]
    prev = _prev(handler, table_)
    out["consumed"] = prev["idx_mapping"].tolist()
    out["table"] = table_[:3].tolist()
    return out


def _prev(handler, table_):
    if vllm_workers.new_release():
        return handler.get_prev_sampled_outputs()
    return handler.get_prev_sampled_outputs(table_)


def early_stop(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """tp 1 x pp 2, two decode steps of req-0..2. `fault` "early-stop": vLLM's mask (patched on
    every stage alike, before the plugin installs) leaves request req-0 out of step 0's
    broadcast, as the seed's inflated count did, yet req-0 decodes again at step 1: the last
    stage's check ends it there."""
    from vllm.v1.worker.gpu import pp_utils

    real = pp_utils.compute_need_sampled_mask
    if fault == "early-stop":
        def compute_need_sampled_mask(input_batch):
            mask = real(input_batch)
            if mask is not None and getattr(input_batch, "early", False):
                mask = mask.copy()
                mask[0] = False
            return mask

        pp_utils.compute_need_sampled_mask = compute_need_sampled_mask
    ps, active = _start(tp, pp, dp, speculative)
    handler = _handler(ps, int(pp))
    steps = []
    for i in range(2):
        batch = _batch()
        batch.early = i == 0
        steps.append(_one(ps, int(pp), active, handler, batch))
    return {"steps": steps}


def _one(ps, pp: int, active, handler, batch) -> dict:
    """One step on a given batch: the last stage's accept and broadcast, or stage 0's receive."""
    if not handler.is_last_rank:
        receive(handler, batch, drafts=True)
        got = handler.queue[-1]
        return {"received": None if got is None else got.num_sampled.tolist()}
    import torch

    final = vllm_workers._rejection_sampler()(vllm_workers._logits(), batch)
    handler.broadcast(final.sampled_token_ids, final.num_sampled, final.num_rejected, batch)
    drafts = torch.full((vllm_workers.R, K), 100, dtype=torch.int64)
    speculator = NS(propose=lambda input_batch, *a, **k: drafts.clone())
    active.vllm.wrap_propose(speculator)
    req = torch.zeros(8, K, dtype=torch.int64)
    req[batch.idx_mapping] = speculator.propose(batch, num_speculative_tokens=K)
    vllm_workers.broadcast_drafts(handler, req, batch)
    return {"sampled": final.num_sampled.tolist()}


def raise_in(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """A real process end: `fault` names the hook method whose body raises on stage 0 (rank 0)."""
    import torch.distributed as dist

    ps, active = _start(tp, pp, dp, speculative)
    if dist.get_rank() == 0:
        def boom(*args, **kwargs):
            raise RuntimeError(f"forced in {fault} on rank 0")

        setattr(active.vllm, fault, boom)
    return _run_step(ps, int(pp), active)


vllm_workers.WORKERS.update(forced_exceptions=forced_exceptions, forced_mismatches=forced_mismatches,
                            table=table, entry=entry, early_stop=early_stop, raise_in=raise_in)


def main(argv: list[str]) -> None:
    vllm_workers.main(argv)
