"""The vLLM plugin's torch side: vLLM's accept and its PP relay tensors through the plan's runtime.

The codec between vLLM's tensors and the plan's decisions is vllm_codec.py. How a site reaches
the earlier stages is the plan's: its converge (when the boundary's group spans stages, the
earlier stages join that one collective) and/or its relay over pp (`column` or `ring`,
through `rt.relay`). Worked example, 4 ranks, tp 2 x pp 2, policy safe, relay broadcast:
replica [0..3], source 2 (first rank of the last stage). Ranks 2, 3 converge the accept
inside vLLM's rejection sampler; ranks 0, 1 join the same broadcast inside PPHandler.receive
and hand vLLM the source's tokens; the drafts likewise (the last stage at propose's return).

Every converge and relay carries the step's rows (batch identity, docs/batch-identity.md):
`input_batch.req_ids` and each row's generation, the count of times its state index
(`idx_mapping_np`) was reused. Under PP that is vLLM's own counter,
`PPHandler.req_idx_gen_np`, bumped by `on_req_idx_freed` on every stage alike; at pp 1 vLLM
keeps none, so the bridge does (`SlotGenerations`). Every stage's relay of a step is issued in
that step (the last stage in PPHandler.broadcast, the earlier ones in PPHandler.receive, which
vLLM consumes pp_size steps later), so it carries the step's rows; the drafts' relay, those of
the step that proposed them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, overload

import torch

from specplan.plan import Plan
from specplan.plugins.common import fit_rows, wants_identity
from specplan.plugins.vllm_codec import (PlanMismatch, accept_layout, decode_accept, encode_accept,
                                         pad_drafts, plan_sites)

__all__ = ["PlanMismatch", "StepFlags", "VllmBridge", "plan_sites"]


class VllmBridge:
    """One process's link between vLLM's tensors and the bound runtime (rounds per site)."""

    def __init__(self, rt, plan: Plan, *, need_mask, width: int):
        self.rt, self.need_mask, self.width = rt, need_mask, width
        self.sites = plan_sites(plan)
        accept = self.sites["accept"]
        self.accept_names = tuple(d.name for d in accept.decisions) if accept else ()
        self.layout = accept_layout(plan, accept) if accept else None
        self.pp = rt.plan.families["pp"].group_size if "pp" in rt.plan.families else 1
        self.stage = rt.plan.stage_of(rt.rank) if self.pp > 1 else 0
        self.rounds: dict[str, int] = defaultdict(lambda: -1)
        self.calls: dict[str, int] = defaultdict(int)  # what went through rt: "converge:<site>", "relay:<site>"
        self.sent_this_step = False  # the step's tokens went to the earlier stages (PPHandler.broadcast)
        self.draft_round = -1
        self.flags = StepFlags(rt)
        self.handler = None  # vLLM's PPHandler (pp > 1), once a hooked method of it ran
        self.slot_generations = SlotGenerations()  # pp 1: the bridge's own reuse counter
        self._rows_of = (None, None)  # (the last batch asked, its rows)
        self.draft_rows = None  # the rows of the step whose drafts the relay carries
        if self.pp > 1:
            self._check_delivery()

    @property
    def last_stage(self) -> bool:
        return self.stage == self.pp - 1

    # -- what reaches the earlier stages ---------------------------------------------------
    def spans(self, kind: str) -> bool:
        site = self.sites[kind]
        if site is None or site.boundary is None:
            return False
        b = self.rt.plan.boundaries[site.boundary]
        return len({self.rt.plan.stage_of(r) for r in self.rt.ranks[b.family]}) > 1

    def relays(self, kind: str) -> bool:
        site = self.sites[kind]
        return site is not None and self.rt.plan.relay_of(site.name) is not None

    def _check_delivery(self) -> None:
        for kind in ("accept", "draft"):
            site = self.sites[kind]
            if site is None or self.spans(kind) or self.relays(kind):
                continue
            raise PlanMismatch(
                f"site {site.name} reaches the earlier pipeline stages neither by a converge "
                "over a group that spans them nor by a relay; vLLM's first stage would embed "
                "placeholders (compile with pipeline.relay_drafts true / another sync.policy)")

    # -- the last stage ----------------------------------------------------------------------
    def accept_last(self, sampled, num_sampled, num_rejected, batch) -> None:
        """Inside vLLM's rejection sampler: the replica ends with the source's tokens, in place."""
        if self.pp > 1 and self.need_mask(batch) is None:
            return  # no row samples: the earlier stages skip their receive as well
        site, rows = self.sites["accept"], sampled.shape[0]
        r = self._begin("accept")
        if site is None or site.boundary is None:
            if site is not None and self.pp == 1:  # not converged (sync.sites off): still probed
                self.rt.maybe_probe(r, self._encode(sampled, num_sampled))
            return
        self.calls[f"converge:{site.name}"] += 1
        dec = self.rt.converge(site.name, self._encode(sampled, num_sampled),
                               round=r, live_rows=rows, requests=self.rows(batch, rows))
        new_sampled, new_num = self._decode(dec, rows, batch)
        num_rejected.add_(num_sampled - new_num)  # decode rows: sampled + rejected = logits
        num_sampled.copy_(new_num)
        sampled.copy_(new_sampled[:, : sampled.shape[1]])
        self.rt.record_acceptance(r, self.rows(batch, rows), num_sampled)
        self.flags.snapshot("accept", r)
        if self.pp == 1:
            self.rt.maybe_probe(r, dec)

    def send_sampled(self, sampled, num_sampled, batch) -> None:
        """PPHandler.broadcast: the step's tokens to the earlier stages, as the plan carries them."""
        self.sent_this_step = True
        rows = sampled.shape[0]
        if sampled.shape[1] > 1:
            values = self._encode(sampled, num_sampled)
            dec = self._relay("accept", values, self.rounds["accept"], rows, batch)
            self.rt.maybe_probe(self.rounds["accept"], dec)
            return
        r = self._begin("target")
        values = {"next_token_ids": sampled[:, 0].contiguous()}
        out = self._converge("target", values, r, rows, batch)
        if self.sites["target"] is not None and self.sites["target"].boundary is not None:
            sampled[:, 0].copy_(out["next_token_ids"][:rows])
        self._relay("target", out, r, rows, batch)

    def converge_drafts(self, drafts, batch) -> None:
        """After the speculator's propose, on the last stage: the replica keeps the source's
        drafts, written back into the tensor propose returned (vLLM then stores that tensor in
        its request state, hands it to the scheduler and to PPHandler.broadcast_drafts, so
        what the relay sends is what this stage keeps). Under PP only on a step whose tokens
        went to the earlier stages: they join the draft's round in PPHandler.receive then."""
        if self.pp > 1 and not self.sent_this_step:
            return
        self.sent_this_step = False
        rows, r = drafts.shape[0], self._begin("draft")
        self.draft_round, self.draft_rows = r, self.rows(batch, rows)  # for send_drafts' relay
        site = self.sites["draft"]
        if site is None or site.boundary is None:
            return
        out = self._converge("draft", {"draft_tokens": pad_drafts(drafts, site)}, r, rows, batch)
        drafts.copy_(out["draft_tokens"][:rows, : drafts.shape[1]].to(drafts.dtype))

    def send_drafts(self, drafts) -> None:
        """PPHandler.broadcast_drafts: the drafts the last stage kept (converged at propose), by
        the plan's relay; the earlier stages of a converge spanning stages already have them."""
        rows, site = drafts.shape[0], self.sites["draft"]
        values = {"draft_tokens": drafts if site is None else pad_drafts(drafts, site)}
        self._relay("draft", values, self.draft_round, rows, requests=self.draft_rows)

    # -- an earlier stage --------------------------------------------------------------------
    def recv_sampled(self, batch, width: int, mask) -> tuple[torch.Tensor, ...]:
        """PPHandler.receive: (sampled [R, width], num_sampled, num_rejected) from the plan."""
        rows = batch.num_reqs
        if width > 1:
            r = self._begin("accept")
            dec = self._receive("accept", r, rows, batch)
            self.rt.maybe_probe(r, dec)
            sampled, num = self._decode(dec, rows, batch)
            logits = (batch.cu_num_logits[1: rows + 1] - batch.cu_num_logits[:rows]).to(num.device)
            rejected = torch.where(num > 0, logits.to(torch.int32) - num, torch.zeros_like(num))
            return sampled[:, :width].contiguous(), num, rejected
        r = self._begin("target")
        dec = self._receive("target", r, rows, batch)
        tokens = dec["next_token_ids"][:rows].reshape(rows, 1).to(torch.int64)
        num = torch.as_tensor(mask, dtype=torch.int32).to(tokens.device)
        return tokens, num, torch.zeros_like(num)

    def recv_drafts(self, rows: int, batch=None) -> torch.Tensor:
        r = self._begin("draft")
        drafts = self._receive("draft", r, rows, batch)["draft_tokens"][:rows]
        return drafts[:, : self.width - 1].to(torch.int64)

    # -- the codec --------------------------------------------------------------------------
    def _encode(self, sampled, num_sampled) -> dict:
        return encode_accept(self.layout, self.accept_names, sampled, num_sampled, self.width)

    def _decode(self, dec: dict, rows: int, batch) -> tuple[torch.Tensor, torch.Tensor]:
        return decode_accept(self.layout, self.accept_names, dec, rows, self.width, batch)

    # -- the runtime ------------------------------------------------------------------------
    def _begin(self, kind: str) -> int:
        self.rounds[kind] += 1
        return self.rounds[kind]

    @overload
    def _converge(self, kind: str, values: dict, r: int, rows: int, batch: Any) -> dict: ...
    @overload
    def _converge(self, kind: str, values: None, r: int, rows: int, batch: Any) -> dict | None: ...

    def _converge(self, kind: str, values: dict | None, r: int, rows: int, batch: Any) -> dict | None:
        site = self.sites[kind]
        if site is None or site.boundary is None:
            return values
        self.calls[f"converge:{site.name}"] += 1
        return self.rt.converge(site.name, values, round=r, live_rows=rows, requests=self.rows(batch, rows))

    def _relay(self, kind: str, values: dict | None, r: int, rows: int, batch=None, *,
               requests=None) -> dict:
        site = self.sites[kind]
        if site is None:
            return values or {}
        if self.relays(kind):
            self.calls[f"relay:{site.name}"] += 1
        if batch is not None:
            requests = self.rows(batch, rows)
        return self.rt.relay(site.name, values, round=r, live_rows=rows, requests=requests)

    def _receive(self, kind: str, r: int, rows: int, batch) -> dict:
        site = self.sites[kind]
        if site is None:
            raise PlanMismatch(f"the plan has no {kind} site, but vLLM's last stage sends one")
        dec = self._converge(kind, None, r, rows, batch) if self.spans(kind) else None
        return self._relay(kind, dec, r, rows, batch)

    # -- batch identity ----------------------------------------------------------------------
    def rows(self, batch, live_rows: int):
        """The step's rows as the runtime's `requests=`: (req_ids, generations) in row order,
        None when identity is off and nothing is traced, or the batch names no requests."""
        if batch is None or not wants_identity(self.rt):
            return None
        last, rows = self._rows_of
        if batch is not last:
            rows = self._read_rows(batch)
            self._rows_of = (batch, rows)
        return fit_rows(rows, live_rows)

    def _read_rows(self, batch):
        ids = list(getattr(batch, "req_ids", None) or [])
        slots = getattr(batch, "idx_mapping_np", None)
        if not ids or slots is None:
            return (ids, None) if ids else None
        if self.pp == 1:
            return ids, self.slot_generations.of(ids, slots)
        if self.handler is None:  # no PPHandler method ran yet here: no state index was freed
            return ids, None
        return ids, self.handler.req_idx_gen_np[slots[: len(ids)]]


class SlotGenerations:
    """pp 1, where vLLM counts no reuse: per state index, the request that held it last and how
    many times another request took it since. Every rank of a replica sees the same steps, so
    every rank counts alike."""

    def __init__(self):
        self.owner: dict[int, str] = {}
        self.generation: dict[int, int] = {}

    def of(self, req_ids: list, slots) -> list[int]:
        gens = []
        for q, s in zip(req_ids, slots.tolist() if hasattr(slots, "tolist") else slots):
            held = self.owner.get(s)
            if held != q:
                if held is not None:
                    self.generation[s] = self.generation.get(s, 0) + 1
                self.owner[s] = q
            gens.append(self.generation.get(s, 0))
        return gens


class StepFlags:
    """The device path's per-step desync check, without a host synchronisation of its own.

    After a step's converges (on the stream they ran on) the runtime's device flag is copied
    to the host without blocking, behind an event; `check` runs where vLLM already waits for
    that stream (AsyncOutput.get_output, after its copy event: the last stage; the next
    PPHandler.receive: an earlier stage) and calls `rt.check_round()`, which raises
    DesyncError naming the site and round, when a copy shows a mismatch. A copy whose event
    has not completed is kept for the next check (never waited on). The host path needs
    none of this: its converges raise within their round.
    """

    def __init__(self, rt):
        self.rt, self.pending = rt, []

    def snapshot(self, what: str, round_: int) -> None:
        flag = self.rt.device_flag
        if flag is None:
            return
        if flag.record.device.type == "cuda":
            host = torch.empty(flag.record.shape, dtype=flag.record.dtype, pin_memory=True)
            host.copy_(flag.record, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
        else:
            host, event = flag.record.clone(), None
        self.pending.append((what, round_, host, event))

    def check(self) -> int:
        """Check every completed copy; the rounds checked (a mismatch raises DesyncError)."""
        done: list = []
        self.pending = [p for p in self.pending if not _ready(p, done)]
        if any(int(host[0]) for _, _, host, _ in done):
            self.rt.check_round()  # the device read that names site and round, then raises
        return len(done)


def _ready(pending, done: list) -> bool:
    """Whether a flag copy has landed on the host (then appended to `done`); never waits."""
    if pending[3] is None or pending[3].query():
        done.append(pending)
        return True
    return False

