"""The vLLM plugin's torch side: vLLM's accept and its PP relay tensors through the plan's runtime.

vLLM 0.33.0 verifies a chain (tree verification was removed), so one accept is
`sampled [R, W]` int64 and `num_sampled [R]` int32, W = K + 1, K = num_speculative_tokens.
The plan names the EAGLE accept triple; the codec between them (one row per request):

    predict            [R * W] int32   sampled, -1 past num_sampled and to W, row-major
    accept_index       [R, W]  int32   r * W + j for j < num_sampled[r], else -1
    num_correct_drafts [R]     int32   num_sampled - 1 (-1: a chunked-prefill row, no sample)
    next_token_ids     [R]     int64   sampled[:, 0] on a step without drafts (first token)
    draft_tokens       [R, K]  int64   the drafts the last stage proposes for the next step

How a site reaches the earlier stages is the plan's: its converge (when the boundary's group
spans stages, the earlier stages join that one collective) and/or its relay over pp (`column`
or `ring`, through `rt.relay`). Worked example, 4 ranks, tp 2 x pp 2, policy safe, relay
broadcast: replica [0..3], source 2 (first rank of the last stage). Ranks 2, 3 converge the
accept inside vLLM's rejection sampler; ranks 0, 1 join the same broadcast inside
PPHandler.receive and hand vLLM the source's tokens; the same for the drafts.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from specplan.plan import Plan
from specplan.plan.model import Site

ACCEPT = ("predict", "accept_index", "num_correct_drafts")
TARGET = ("next_token_ids",)
DRAFT = ("draft_tokens",)


# Methods vLLM 0.33.0 runs whose plans carry SGLang's site layout (vLLM's proposer class).
SGLANG_LAYOUT = {"dspark": "DSparkSpeculator", "dflash": "DFlashSpeculator"}


class PlanMismatch(ValueError):
    """The plan's sites cannot carry vLLM's tensors (the plugin refuses the start)."""


def plan_sites(plan: Plan) -> dict[str, Site | None]:
    """The plan's accept, first-token and draft sites, by the decisions vLLM's tensors map to."""
    found: dict[str, Site | None] = {"accept": None, "target": None, "draft": None}
    wanted = {"accept": ACCEPT, "target": TARGET, "draft": DRAFT}
    for site in plan.sites:
        names = tuple(d.name for d in site.decisions)
        kind = next((k for k, v in wanted.items() if site.phase == k and names == v), None)
        if kind is None and site.phase in ("accept", "draft") and plan.speculative.method != "none":
            raise PlanMismatch(_unmapped(plan.speculative.method, site.name, names, wanted[site.phase]))
        if kind:
            found[kind] = site
    return found


def _unmapped(method: str, site: str, names: tuple, wanted: tuple) -> str:
    if method in SGLANG_LAYOUT:
        return (f"speculative.method {method}: vLLM 0.33.0 runs {method} (its V2 {SGLANG_LAYOUT[method]} "
                "proposes, its chain RejectionSampler verifies: sampled, num_sampled), but the plan's "
                f"site {site} carries {list(names)}, SGLang 0.5.23's {method} accept, which vLLM "
                "does not compute; the plugin converges the chain accept of eagle, eagle3, mtp and "
                "standalone plans")
    return (f"site {site} carries {list(names)}; vLLM's chain accept maps to {list(wanted)} "
            "(methods of the EAGLE family: eagle, eagle3, mtp, standalone, with topk 1)")


def encode_accept(sampled: torch.Tensor, num_sampled: torch.Tensor, width: int) -> dict:
    rows = sampled.shape[0]
    padded = torch.full((rows, width), -1, dtype=torch.int32, device=sampled.device)
    padded[:, : sampled.shape[1]] = sampled
    cols = torch.arange(width, dtype=torch.int32, device=sampled.device)
    live = cols[None, :] < num_sampled[:, None]  # past num_sampled vLLM leaves stale memory
    flat = torch.arange(rows, dtype=torch.int32, device=sampled.device)[:, None] * width + cols
    index = torch.where(live, flat, torch.full_like(flat, -1))
    predict = torch.where(live, padded, torch.full_like(padded, -1))
    return {"predict": predict.reshape(-1), "accept_index": index,
            "num_correct_drafts": (num_sampled - 1).to(torch.int32)}


def decode_accept(dec: dict, rows: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sampled [rows, width] int64, num_sampled [rows] int32) from converged decisions."""
    sampled = dec["predict"][: rows * width].reshape(rows, width).to(torch.int64)
    return sampled, (dec["num_correct_drafts"][:rows] + 1).to(torch.int32)


class VllmBridge:
    """One process's link between vLLM's tensors and the bound runtime (rounds per site)."""

    def __init__(self, rt, plan: Plan, *, need_mask, width: int):
        self.rt, self.need_mask, self.width = rt, need_mask, width
        self.sites = plan_sites(plan)
        self.pp = rt.plan.families["pp"].group_size if "pp" in rt.plan.families else 1
        self.stage = rt.plan.stage_of(rt.rank) if self.pp > 1 else 0
        self.rounds: dict[str, int] = defaultdict(lambda: -1)
        self.calls: dict[str, int] = defaultdict(int)  # what went through rt: "converge:<site>", "relay:<site>"
        self.sent_this_step = False  # the step's tokens went to the earlier stages (PPHandler.broadcast)
        self.draft_round = -1
        self.flags = StepFlags(rt)
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
            return
        self.calls[f"converge:{site.name}"] += 1
        dec = self.rt.converge(site.name, encode_accept(sampled, num_sampled, self.width),
                               round=r, live_rows=rows, requests=_ids(batch))
        new_sampled, new_num = decode_accept(dec, rows, self.width)
        num_rejected.add_(num_sampled - new_num)  # decode rows: sampled + rejected = logits
        num_sampled.copy_(new_num)
        sampled.copy_(new_sampled[:, : sampled.shape[1]])
        self.rt.record_acceptance(r, _ids(batch), num_sampled)
        self.flags.snapshot("accept", r)
        if self.pp == 1:
            self.rt.maybe_probe(r, dec)

    def send_sampled(self, sampled, num_sampled, batch) -> None:
        """PPHandler.broadcast: the step's tokens to the earlier stages, as the plan carries them."""
        self.sent_this_step = True
        rows = sampled.shape[0]
        if sampled.shape[1] > 1:
            values = encode_accept(sampled, num_sampled, self.width)
            dec = self._relay("accept", values, self.rounds["accept"], rows)
            self.rt.maybe_probe(self.rounds["accept"], dec)
            return
        r = self._begin("target")
        values = {"next_token_ids": sampled[:, 0].contiguous()}
        out = self._converge("target", values, r, rows, batch)
        if self.sites["target"] is not None and self.sites["target"].boundary is not None:
            sampled[:, 0].copy_(out["next_token_ids"][:rows])
        self._relay("target", out, r, rows)

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
        out = self._converge("draft", {"draft_tokens": drafts}, r, rows, batch)
        if out is not None and out.get("draft_tokens") is not drafts:
            drafts.copy_(out["draft_tokens"][:rows].to(drafts.dtype))
        self.draft_round = r

    def send_drafts(self, drafts) -> None:
        """PPHandler.broadcast_drafts: the drafts the last stage kept (converged at propose), by
        the plan's relay; the earlier stages of a converge spanning stages already have them."""
        rows = drafts.shape[0]
        self._relay("draft", {"draft_tokens": drafts}, self.draft_round, rows)

    # -- an earlier stage --------------------------------------------------------------------
    def recv_sampled(self, batch, width: int, mask) -> tuple[torch.Tensor, ...]:
        """PPHandler.receive: (sampled [R, width], num_sampled, num_rejected) from the plan."""
        rows = batch.num_reqs
        if width > 1:
            r = self._begin("accept")
            dec = self._receive("accept", r, rows, batch)
            self.rt.maybe_probe(r, dec)
            sampled, num = decode_accept(dec, rows, self.width)
            logits = (batch.cu_num_logits[1: rows + 1] - batch.cu_num_logits[:rows]).to(num.device)
            rejected = torch.where(num > 0, logits.to(torch.int32) - num, torch.zeros_like(num))
            return sampled[:, :width].contiguous(), num, rejected
        r = self._begin("target")
        dec = self._receive("target", r, rows, batch)
        tokens = dec["next_token_ids"][:rows].reshape(rows, 1).to(torch.int64)
        num = torch.as_tensor(mask, dtype=torch.int32).to(tokens.device)
        return tokens, num, torch.zeros_like(num)

    def recv_drafts(self, rows: int) -> torch.Tensor:
        r = self._begin("draft")
        return self._receive("draft", r, rows, None)["draft_tokens"][:rows].to(torch.int64)

    # -- the runtime ------------------------------------------------------------------------
    def _begin(self, kind: str) -> int:
        self.rounds[kind] += 1
        return self.rounds[kind]

    def _converge(self, kind: str, values: dict, r: int, rows: int, batch) -> dict:
        site = self.sites[kind]
        if site is None or site.boundary is None:
            return values
        self.calls[f"converge:{site.name}"] += 1
        return self.rt.converge(site.name, values, round=r, live_rows=rows, requests=_ids(batch))

    def _relay(self, kind: str, values: dict | None, r: int, rows: int) -> dict:
        site = self.sites[kind]
        if site is None:
            return values or {}
        if self.relays(kind):
            self.calls[f"relay:{site.name}"] += 1
        return self.rt.relay(site.name, values, round=r, live_rows=rows)

    def _receive(self, kind: str, r: int, rows: int, batch) -> dict:
        site = self.sites[kind]
        if site is None:
            raise PlanMismatch(f"the plan has no {kind} site, but vLLM's last stage sends one")
        dec = self._converge(kind, None, r, rows, batch) if self.spans(kind) else None
        return self._relay(kind, dec, r, rows)


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


def _ids(batch):
    return None if batch is None else list(getattr(batch, "req_ids", None) or []) or None
