"""Rank programs for the vLLM plugin tests: vLLM's own code on gloo, the plugin loaded by vLLM's
own loader. Run by tests/ranks.py's launch (one process per rank, torchrun's env).

One launch runs one step of a V2 runner on every rank: the real initialize_model_parallel
(through the plugin's start-up check), then on the last stage vLLM's real RejectionSampler
(its Triton kernels) and PPHandler.broadcast / broadcast_drafts, on the earlier stages
PPHandler.receive. Ranks draw different coins (per-rank seeds) and propose different drafts,
so without the plugin their accepted tokens differ.

Stand-ins, for what needs a GPU or a loaded model only: the sampler state the rejection
sampler reads (temperature and seed per request, logits unchanged by sampling params), the
step's InputBatch fields, the speculative config (SpeculativeConfig's own field names, no
draft model), and PPHandler's CUDA streams (the handler is made without its __init__).
Each rank reports by tests/ranks.py's protocol: `RESULT <json>`, `REFUSED <line>` or `ERROR internal`.
"""

from __future__ import annotations

import json
from collections import deque
from types import SimpleNamespace as NS

from tests.ranks import serve_engine

R, K, V = 3, 3, 64  # requests, speculative tokens, vocabulary


def main(argv: list[str]) -> None:
    """argv: the worker, the wheel's root, the worker's arguments (tests/ranks.py's protocol)."""
    serve_engine(WORKERS, argv, "vllm_harness")


def step(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """One step. `fault` "stale:<rank>": that rank's plugin runs one accept round ahead, so its
    guard header names another round than its peers expect (a forged header)."""
    import vllm_harness

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative))
    active = next(iter(common._ACTIVE.values()), None)
    if active is not None:  # vLLM may load its plugins again: nothing more is installed
        from specplan.plugins.vllm import register

        before = list(active.hooks)
        register(), register()
        assert active.hooks == before, (before, active.hooks)
    out = {"hooks": list(active.hooks) if active else [],
           "groups": {"tp": ps._TP.group_ranks, "pp": ps._PP.group_ranks, "dp": ps._DP.group_ranks},
           "startup_s": getattr(active, "startup_s", None)}
    if fault.startswith("stale:") and int(fault.split(":")[1]) == ps.get_world_group().rank:
        active.bridge.rounds["accept"] += 1
    out.update(_run_step(ps, int(pp), active, stop_after_output=bool(fault)))
    return out


def _run_step(ps, pp: int, active, stop_after_output: bool = False, handler=None) -> dict:
    import torch

    batch = _batch()
    if handler is None and pp > 1:
        handler = _handler(ps, pp)
    if handler is not None and not handler.is_last_rank:
        # A faulted run's last stage stops at its step check, before it proposes drafts.
        receive(handler, batch, drafts=not stop_after_output)
        got = handler.queue[-1]
        drafts = None if got.draft_tokens is None else got.draft_tokens.tolist()
        out = {"received": {"sampled": _accepted(got.sampled_tokens, got.num_sampled),
                            "num_sampled": got.num_sampled.tolist(),
                            "num_rejected": got.num_rejected.tolist(), "drafts": drafts},
               "calls": _calls(active)}
        # The next step's receive, on a batch with no sampled row (no collective): an earlier
        # stage's step check (DesyncError) ends the process there (vllm_guard.py).
        receive(handler, _batch(prefill_len=100), drafts=False)
        return out
    rs = _rejection_sampler()
    logits = _logits()
    call = type(rs).__call__
    local = getattr(call, "__wrapped__", call)(rs, logits, batch)  # vLLM's own, unhooked
    final = rs(logits, batch)  # through the plugin when it is on
    out = {"local": _sampler_out(local), "final": _sampler_out(final)}
    if handler is not None:
        handler.broadcast(final.sampled_token_ids, final.num_sampled, final.num_rejected, batch)
    # Where vLLM waits for the step's output copy: the plugin's step check (DesyncError) ends
    # the process here.
    _async_output(final, batch).get_output()
    if stop_after_output:  # a faulted run: a peer stopped at its step check, run nothing more
        return out
    # The runner's draft path: propose (through the plugin's wrapper of the last stage's
    # speculator), req_states.draft_tokens[idx_mapping] = drafts, then the same rows read back
    # and handed to PPHandler.broadcast_drafts.
    drafts = torch.full((R, K), 100 + torch.distributed.get_rank(), dtype=torch.int64)
    speculator = NS(propose=lambda input_batch, *a, **k: drafts.clone())
    if active is not None:
        active.vllm.wrap_propose(speculator)
    req_drafts = torch.zeros(8, K, dtype=torch.int64)  # RequestState.draft_tokens (pinned: CUDA)
    req_drafts[batch.idx_mapping] = speculator.propose(batch, num_speculative_tokens=K)
    kept = req_drafts[batch.idx_mapping]
    if handler is not None:
        broadcast_drafts(handler, req_drafts, batch)
    out.update(drafts=drafts.tolist(), kept=kept.tolist(), calls=_calls(active))
    return out


def new_release() -> bool:
    """vLLM 0.33.0's PPHandler (receive takes recv_drafts), else 0.32's."""
    from vllm.v1.worker.gpu.pp_utils import PPHandler

    return hasattr(PPHandler, "_sample_len")


def receive(handler, batch, drafts: bool):
    """The runner's call: 0.33.0 says whether the step proposed drafts; 0.32 receives them on
    every sampled step of a speculating engine (its handler's num_speculative_steps)."""
    if new_release():
        return handler.receive(batch, recv_drafts=drafts)
    return handler.receive(batch)


def broadcast_drafts(handler, req_drafts, batch):
    """The runner's call: 0.33.0 hands the step's rows, 0.32 the request-state table and the batch."""
    if new_release():
        return handler.broadcast_drafts(req_drafts[batch.idx_mapping])
    return handler.broadcast_drafts(req_drafts, batch)


def _async_output(final, batch):
    """vLLM's AsyncOutput as the runner leaves it after its copies (made without its __init__:
    CUDA streams and events); get_output is vLLM's own."""
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.worker.gpu.async_utils import AsyncOutput

    out = object.__new__(AsyncOutput)
    ids = list(batch.req_ids)
    out.model_runner_output = ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)})
    out.copy_event = NS(synchronize=lambda: None)
    out.sampled_token_ids = final.sampled_token_ids.numpy()
    out.num_sampled_tokens_np = final.num_sampled.numpy()
    out.sampling_mask_tensors = out.num_nans = out.logprobs_tensors = out.pending_aux_output = None
    out._has_fault = None
    out.prompt_logprobs_dict, out.prompt_token_id_logprobs_dict = {}, {}
    return out


def _calls(active) -> dict:
    """What went through the plan's runtime on this rank ("converge:<site>", "relay:<site>")."""
    bridge = getattr(active, "bridge", None)
    return dict(bridge.calls) if bridge is not None else {}


def _sampler_out(out) -> dict:
    """The tokens each request committed (vLLM reads sampled up to num_sampled only)."""
    return {"sampled": _accepted(out.sampled_token_ids, out.num_sampled), "num_sampled": out.num_sampled.tolist(),
            "num_rejected": out.num_rejected.tolist()}


def _accepted(sampled, num) -> list[list[int]]:
    return [row[:n] for row, n in zip(sampled.tolist(), num.tolist())]


def _logits():
    """The same target logits on every rank (identical model output): token (7r + j + 1) % V is
    favoured at row j of request r, so each draft is accepted with a probability the coin decides."""
    import torch

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(R * (K + 1), V, generator=g)
    for r in range(R):
        for j in range(K + 1):
            logits[r * (K + 1) + j, (7 * r + j + 1) % V] += 6.0
    return logits


def _batch(prefill_len: int = 10, req_ids=None, slots=None):
    """The step's InputBatch fields the rejection sampler and PPHandler read (R decode rows;
    with prefill_len past the computed tokens, R rows of a prefill chunk that samples nothing).
    `slots`: each row's state index (idx_mapping; default row r in index r)."""
    import numpy as np
    import torch

    n = R * (K + 1)
    rows = torch.arange(n)
    req = rows // (K + 1)
    local = rows % (K + 1)
    cu = torch.arange(0, n + 1, K + 1, dtype=torch.int32)
    slots = list(range(R)) if slots is None else slots
    return NS(num_reqs=R, num_draft_tokens=R * K, req_ids=req_ids or [f"req-{r}" for r in range(R)],
              input_ids=((7 * req + local) % V).to(torch.int32), positions=(20 + local).to(torch.int64),
              logits_indices=rows.to(torch.int64), expanded_idx_mapping=req.to(torch.int32),
              expanded_local_pos=local.to(torch.int32), idx_mapping=torch.tensor(slots, dtype=torch.int32),
              idx_mapping_np=np.array(slots, dtype=np.int32), cu_num_logits=cu, cu_num_logits_np=cu.numpy(),
              seq_lens=torch.full((R,), 24, dtype=torch.int32),
              seq_lens_cpu_upper_bound=torch.full((R,), 24, dtype=torch.int32),
              num_computed_tokens_np=np.full(R, 20), prefill_len_np=np.full(R, prefill_len),
              num_scheduled_tokens=np.full(R, K + 1), max_seq_len_np=None,
              is_prefilling_np=np.zeros(R, dtype=bool))


def _rejection_sampler():
    """vLLM's V2 RejectionSampler over the sampler state it reads: temperature 1, per-rank seeds
    (each rank draws its own coins), logits unchanged by sampling params."""
    import torch
    import torch.distributed as dist
    from vllm.v1.worker.gpu.sample.states import NO_LOGPROBS
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler import RejectionSampler

    # Per state index (max_num_seqs 8), as vLLM's request states: read at each row's idx_mapping.
    seeds = torch.tensor([1000 * dist.get_rank() + 17 * r + 1 for r in range(8)], dtype=torch.int64)
    states = NS(temperature=NS(gpu=torch.ones(8)), seeds=NS(gpu=seeds), top_k=NS(np=None),
                max_num_logprobs=lambda idx: NO_LOGPROBS)
    sampler = NS(apply_sampling_params=lambda logits, *a, **k: logits, sampling_states=states,
                 logprobs_mode="raw_logprobs", compute_nans=False, return_sampling_mask=False,
                 use_fp64_gumbel=False, req_states=NS(prefill_len=NS(gpu=torch.full((8,), 10, dtype=torch.int32))))
    spec = NS(num_speculative_tokens=K, enable_adaptive_verification=False, rejection_sample_method="standard",
              fly_entropy_threshold=0.3, fly_entropy_top_k=3, synthetic_acceptance_rates=None,
              fly_window_size=None)
    return RejectionSampler(sampler, spec, torch.device("cpu"))


def _handler(ps, pp: int):
    """vLLM's PPHandler without its __init__ (CUDA streams): the fields its methods read."""
    import numpy as np
    import torch
    from vllm.v1.worker.gpu.pp_utils import PPHandler

    group = ps.get_pp_group()
    h = object.__new__(PPHandler)
    h.is_last_rank, h.last_rank = group.is_last_rank, group.last_rank
    h.max_sample_len, h.num_speculative_steps, h.device = K + 1, K, torch.device("cpu")
    h.queue = deque() if h.is_last_rank else deque([None] * pp)
    h.req_idx_gen_np = np.zeros(8, dtype=np.int32)
    h.broadcast_group = group.device_group
    if new_release():
        h.sampled_tokens_broadcast = False
    return h


def reuse(tp: str, pp: str, dp: str, speculative: str, fault: str = "") -> dict:
    """Batch identity on the engine's own rows; `fault` "reuse": one rank's rows differ from
    its peers' by one generation. pp > 1: the last stage frees state index 1 first (vLLM's
    PPHandler.on_req_idx_freed, hooked) while request req-1 keeps row 1, so stage 0 (the
    receiver of the step's accept) raises BatchMismatch. pp 1: two steps; in step 0 rank 0
    holds req-1 in index 1, rank 1 in index 5; in step 1 req-3 takes index 1 on both ranks:
    reused on rank 0 only (the plugin's own counter), so rank 1 raises at the step's accept."""
    import torch.distributed as dist
    import vllm_harness

    from specplan.plugins import common

    ps = vllm_harness.start_engine(int(tp), int(pp), int(dp), json.loads(speculative))
    active = next(iter(common._ACTIVE.values()))
    rank, faulted = ps.get_world_group().rank, fault == "reuse"
    if int(pp) > 1:
        handler = _handler(ps, int(pp))
        if faulted and handler.is_last_rank:
            handler.on_req_idx_freed(1)
        out = _run_step(ps, int(pp), active, stop_after_output=faulted, handler=handler)
    else:
        steps = [(None, [0, 5, 2] if faulted and rank == 1 else None), (["req-0", "req-3", "req-2"], None)]
        out = {"steps": [_pp1_step(active, _batch(req_ids=ids, slots=slots), propose=not (faulted and i == 1))
                         for i, (ids, slots) in enumerate(steps)]}
    # No rank leaves while a peer still asks it for its rows; a peer whose hook found a mismatch
    # ended its process (vllm_guard.py), so the barrier may fail here.
    try:
        dist.barrier()
    except Exception:
        out["peer_gone"] = True
    return out


def _pp1_step(active, batch, propose: bool) -> dict:
    """The rejection sampler through the plugin, then (propose) the drafts' converge; what the
    rank keeps."""
    import torch

    final = _rejection_sampler()(_logits(), batch)
    out = {"final": _sampler_out(final)}
    if propose:
        drafts = torch.full((R, K), 100 + torch.distributed.get_rank(), dtype=torch.int64)
        speculator = NS(propose=lambda input_batch, *a, **k: drafts.clone())
        active.vllm.wrap_propose(speculator)
        out["kept"] = speculator.propose(batch, num_speculative_tokens=K).tolist()
    return out


WORKERS = {"step": step, "reuse": reuse}
