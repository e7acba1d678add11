"""The vLLM plugin's PPHandler hooks, for both release lines, and the two run-time checks of the
seed's silent corruptions (vllm.py installs them from engines/vllm/hooks.py's tables).

Release lines (each body declares the role and the release's signature it serves: `@serves`):
- 0.33.0: `receive(input_batch, recv_drafts)` receives drafts when the step proposed some;
  `broadcast_drafts(draft_tokens)` sends the step's rows when its sampled tokens went out.
- 0.32.x: `receive(input_batch)` receives drafts on every sampled step of a speculating engine,
  its sampled tokens K + 1 wide; `broadcast_drafts(draft_tokens, input_batch)` sends the
  request-state table at the step's `idx_mapping` on every sampled step.

The checks (each raises a RuntimeDivergence, which ends the process: vllm_guard.py):
- stale entry (`get_prev_sampled_outputs`, earlier stages): an entry received at step T is
  consumed at step T + pp_size; the rows vLLM writes from it must still be held by the request
  (and generation) that held them at receive. The plugin keeps its own record of each entry's
  rows; when a state index was freed since, it reads what vLLM writes (the returned
  `idx_mapping`, and in 0.32 the draft table's rows, which that release writes itself) and
  raises `StaleEntry` naming row, request and generations if a freed row is written.
- broadcast ending early (`broadcast`, last stage): a row that samples this step but lies
  outside the sampled-rows mask must not go on (its token never reaches the earlier stages,
  which would repeat a stale one). The last stage notes such requests; one that comes back as
  a decode row raises `BroadcastEndedEarly` naming the request and both steps. Host data only.

Worked example, tp 1 x pp 2, req-1 in state index 1: stage 0 receives step 4's entry (req-1
gen 0); req-1 finishes, index 1 is freed (gen 1) and taken by req-3; at step 6 vLLM's filter
drops row 1, so nothing is checked beyond a host comparison; had it written row 1, stage 0
raises `StaleEntry: ... row 1: state index 1 held request req-1 gen 0 at receive (step 4),
gen 1 now, and vLLM writes it`.
"""

from __future__ import annotations

from collections import OrderedDict
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from specplan.plugins.roles import serves

if TYPE_CHECKING:
    from specplan.engines.vllm.hooks import Release
    from specplan.plugins.vllm_bridge import VllmBridge

MAX_NOTED = 4096  # requests noted as sampled outside the mask (they finish: a bounded memory)
ERRORS = {"StaleEntry": "A pipeline entry's rows are written into state indices another request holds now.",
          "BroadcastEndedEarly": "A request went on after its sampled token was left out of the broadcast."}
_MADE: dict[str, type] = {}


def __getattr__(name: str):
    """StaleEntry, BroadcastEndedEarly: RuntimeDivergence subclasses, made on first use (the
    runtime package imports torch, which this module must not at vLLM's plugin load)."""
    if name not in ERRORS:
        raise AttributeError(name)
    if name not in _MADE:
        from specplan.runtime.errors import RuntimeDivergence

        _MADE[name] = type(name, (RuntimeDivergence,), {"__doc__": ERRORS[name], "__module__": __name__})
    return _MADE[name]


class PPHooks:
    """VllmState's PPHandler methods (mixed in): self.bridge, self.release, self.pending_recv."""

    bridge: VllmBridge
    release: Release
    pending_recv: Any  # vLLM's PendingRecv class (untyped engine code)
    entries: Entries

    # -- the last stage ------------------------------------------------------------------------
    @serves("pp_req_idx_freed")
    def pp_req_idx_freed(self, original, handler, req_idx):
        """vLLM bumps the state index's generation; the bridge reads it from this handler."""
        self.bridge.handler = handler
        return original(handler, req_idx)

    @serves("pp_broadcast")
    def pp_broadcast(self, original, handler, sampled, num_sampled, num_rejected, input_batch):
        self.bridge.handler = handler
        mask = self.bridge.need_mask(input_batch)
        self.sent_rows.check(input_batch, mask, self.bridge.rounds["accept"])
        sends = mask is not None
        if not self.release.drafts_every_sampled_step:
            handler.sampled_tokens_broadcast = sends  # 0.33.0's broadcast_drafts reads it
        if not sends:
            self.bridge.sent_this_step = False
            return
        # On the main stream: a converge here writes the source's tokens back into the
        # tensors the runner postprocesses next.
        self.bridge.send_sampled(sampled, num_sampled, input_batch)

    @serves("pp_broadcast_drafts", "(self, draft_tokens)")
    def pp_broadcast_drafts(self, original, handler, draft_tokens):
        """0.33.0: the step's drafts, when its sampled tokens went out."""
        self.bridge.handler = handler
        if handler.sampled_tokens_broadcast:
            self.bridge.send_drafts(draft_tokens)

    @serves("pp_broadcast_drafts", "(self, draft_tokens, input_batch)")
    def pp_broadcast_drafts_table(self, original, handler, draft_tokens, input_batch):
        """0.32.x: the request-state table at the step's rows, on every sampled step."""
        self.bridge.handler = handler
        if self.bridge.need_mask(input_batch) is not None:
            self.bridge.send_drafts(draft_tokens[input_batch.idx_mapping].contiguous())

    # -- an earlier stage ----------------------------------------------------------------------
    @serves("pp_receive", "(self, input_batch, recv_drafts)")
    def pp_receive(self, original, handler, input_batch, recv_drafts):
        """0.33.0: drafts as the runner says; sampled tokens `_sample_len` wide."""
        return self._receive(handler, input_batch, recv_drafts, handler._sample_len(input_batch))

    @serves("pp_receive", "(self, input_batch)")
    def pp_receive_every_step(self, original, handler, input_batch):
        """0.32.x: drafts on every sampled step of a speculating engine; K + 1 columns always."""
        width = handler.max_sample_len if input_batch.num_draft_tokens > 0 else 1
        return self._receive(handler, input_batch, handler.num_speculative_steps > 0, width,
                             pad_to=handler.max_sample_len)

    def _receive(self, handler, input_batch, recv_drafts: bool, width: int, pad_to: int = 0):
        self.bridge.handler = handler
        self.bridge.flags.check()  # earlier receives whose flag copy has landed
        mask = self.bridge.need_mask(input_batch)
        if mask is None:
            return False
        gen = handler.req_idx_gen_np[input_batch.idx_mapping_np]
        with _side_stream(handler):
            sampled, num, rejected = self.bridge.recv_sampled(input_batch, width, mask)
            if pad_to > sampled.shape[1]:  # 0.32's PendingRecv holds max_sample_len columns
                sampled = _pad(sampled, pad_to)
            drafts = self.bridge.recv_drafts(input_batch.num_reqs, input_batch) if recv_drafts else None
            self.bridge.flags.snapshot("receive", self.bridge.rounds["accept"])
            event = _record(handler, (sampled, num, rejected, drafts))
        entry = self.pending_recv(event, sampled, num, rejected, input_batch.idx_mapping,
                                  input_batch.idx_mapping_np, mask, gen, drafts)
        handler.queue[-1] = entry
        self.entries.note(entry, input_batch, gen.copy(), self.bridge.rounds["accept"])
        return bool(mask.all())

    @serves("pp_prev_outputs", "(self)")
    def pp_prev_outputs(self, original, handler):
        """0.33.0: vLLM writes the entry's tokens and drafts later, through the returned mapping."""
        check = self.entries.before(handler)
        out = original(handler)
        check.after(out, None)
        return out

    @serves("pp_prev_outputs", "(self, draft_tokens_to_update=None)")
    def pp_prev_outputs_table(self, original, handler, draft_tokens_to_update=None):
        """0.32.x: vLLM writes the entry's drafts into the table itself, here."""
        check = self.entries.before(handler, draft_tokens_to_update)
        out = original(handler, draft_tokens_to_update)
        check.after(out, draft_tokens_to_update)
        return out


class SentRows:
    """The last stage's check that the broadcast does not end early (module docstring)."""

    def __init__(self):
        self.noted: OrderedDict[str, int] = OrderedDict()  # request -> the step it sampled unsent
        self.step = 0

    def check(self, batch, mask, round_: int) -> None:
        self.step += 1
        ids = list(getattr(batch, "req_ids", None) or [])
        prefilling = batch.is_prefilling_np
        for r, q in enumerate(ids):
            if q in self.noted and not prefilling[r]:
                raise __getattr__("BroadcastEndedEarly")(
                    f"broadcast ended early at round {round_}: row {r}, request {q} decodes at step "
                    f"{self.step} after step {self.noted[q]} sampled it outside the sampled-rows "
                    "mask: the earlier stages never received that token and embed a stale one "
                    "(vLLM's compute_need_sampled_mask left out a request that goes on)")
        samples = batch.num_computed_tokens_np + batch.num_scheduled_tokens >= batch.prefill_len_np
        for r, q in enumerate(ids):
            if samples[r] and (mask is None or not mask[r]):
                self.noted[q] = self.step
                self.noted.move_to_end(q)
        while len(self.noted) > MAX_NOTED:
            self.noted.popitem(last=False)


class Entries:
    """The earlier stages' record of each pipeline entry's rows, and the stale-entry check."""

    def __init__(self):
        self.rows: dict[int, tuple] = {}  # id(entry) -> (req_ids, slots, generations, round)

    def note(self, entry, batch, gens, round_: int) -> None:
        ids = list(getattr(batch, "req_ids", None) or [])
        self.rows[id(entry)] = (ids, batch.idx_mapping_np.copy(), gens, round_)

    def before(self, handler, table=None) -> "_Consume":
        entry = handler.queue[0] if handler.queue else None
        rows = self.rows.pop(id(entry), None) if entry is not None else None
        return _Consume(handler, rows, table)


class _Consume:
    """One consumption: the rows freed since receive, and whether vLLM writes any of them."""

    def __init__(self, handler, rows, table):
        self.rows, self.stale, self.before = rows, [], None
        if rows is None:
            return
        ids, slots, gens, _ = rows
        now = handler.req_idx_gen_np[slots]
        self.now = now
        self.stale = [r for r in range(len(slots)) if now[r] != gens[r]]
        if self.stale and table is not None:
            self.before = table[slots[self.stale].tolist()].clone()

    def after(self, out, table) -> None:
        if not self.stale:
            return  # no state index freed since receive: nothing vLLM writes can be stale
        written = set()
        if out is not None:
            mapping = out["idx_mapping"].cpu().tolist()
            written = {r for r in self.stale if mapping[r] >= 0}
        if self.before is not None:
            changed = (table[self.rows[1][self.stale].tolist()] != self.before).any(dim=1).tolist()
            written |= {r for r, c in zip(self.stale, changed) if c}
        if written:
            raise __getattr__("StaleEntry")(self._message(min(written)))

    def _message(self, r: int) -> str:
        ids, slots, gens, round_ = self.rows
        q = ids[r] if r < len(ids) else "?"
        return (f"stale pipeline entry of round {round_}: row {r}: state index {int(slots[r])} held "
                f"request {q} gen {int(gens[r])} at receive, gen {int(self.now[r])} now (freed and "
                "reused since), and vLLM writes the entry's tokens or drafts into it")


def _pad(sampled, width: int):
    import torch

    out = torch.zeros((sampled.shape[0], width), dtype=sampled.dtype, device=sampled.device)
    out[:, : sampled.shape[1]] = sampled
    return out


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
