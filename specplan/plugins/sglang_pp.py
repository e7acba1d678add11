"""The SGLang plugin under pipeline parallelism: the plan's relays ride SGLang's own PP relay.

SGLang 0.5.23 runs speculative decoding under PP (SGLANG_ENABLE_PP_SPEC=1; EAGLE or NEXTN,
no DP-attention) on the last stage only: it drafts, verifies and accepts there, then puts the
round's results into its output tensor dict (`SchedulerPPMixin._pp_prepare_tensor_dict`:
`next_token_ids`, `spec_accept_lens`, `spec_new_seq_lens`, `spec_bonus_tokens`,
`spec_accept_index`, and the next round's tree `spec_next_chain` / `_parents` / `_top_scores`)
and sends it round the ring, last -> 0 -> 1 -> ... -> last; every stage processes it
(`_pp_prep_batch_result`, against the snapshot of the batch that ran the forward) and forwards
it unchanged. Earlier stages never reach the sites the other hooks converge.

The plan SGLang runs under PP relays (engines/sglang/convention.py: `pipeline_relay` ring): each site
converges over the last stage's ranks of the replica (the site hooks fire there), and each
site read on every stage is relayed stage to stage. The plugin carries each relay inside
SGLang's message, so it adds no message of its own and keeps SGLang's send order:

- `_pp_prepare_tensor_dict` (last stage): for each relayed site this forward converged,
  `rt.relay_out` (guard header + the converged decisions, with the rows of that converge)
  under the key `specplan.<site>`;
- `_pp_prep_batch_result` (earlier stages, before SGLang reads the message): a decode batch's
  message must carry the accept relay and an extend batch's must not, else the stages disagree
  on which batch it answers (DesyncError). Each relay it carries (target; accept, then the next
  round's draft) is checked with `rt.relay_in` against this stage's own round and the rows of
  the batch the message answers (`batch_rows` of the forward's snapshot, read now: a row handed
  to another request since the forward is a BatchMismatch, the stale-slot bug), then
  `rt.check_round()` (the device path's read). Then SGLang's tensors are written from the
  relayed decisions (`accept_lens` = num_correct_drafts + 1, `accept_index`, `bonus_tokens` =
  predict at the last accepted index, the chain's drafts, a tree's parents and top scores, a
  prefill's `next_token_ids`), so what every stage commits is what the plan relayed.

Rounds: the guard header's round is the plugin's count of accepts, on the last stage from its
accept hook, on an earlier stage from the accept relays it consumed, both in ring order.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines.sglang.hooks import table
from specplan.plugins.roles import serves

KEY = "specplan."  # prefix of the relays' tensors in SGLang's output dict


@dataclass
class Converged:
    """A site's converge on the last stage, kept until the forward's output dict is made."""

    round: int
    values: dict
    live_rows: int
    requests: object  # the converge's Batch, or None


def pp_hooks(state) -> list[tuple[str, object]]:
    """(target, AROUND hook) for a plan with pp > 1 that relays sites; else none."""
    if state.active.plan.pp == 1 or not state.active.plan.relays:
        return []
    relay = PPRelay(state)
    state.pp = relay
    return [(table().target(role), body) for role, body in (("pp_send", relay.prepare_tensor_dict),
                                                            ("pp_receive", relay.prep_batch_result))]


class PPRelay:
    """The two hooks; `state` is the plugin's SGLangState (its plan, runtime and `round`)."""

    def __init__(self, state):
        self.state = state
        self.converged: dict[str, Converged] = {}  # site -> this forward's converge (last stage)
        self.checked = 0  # relays checked on this (earlier) stage

    def record(self, site: str, round_: int, values: dict, live_rows: int, requests) -> None:
        """Called by the site hooks after each converge: kept only when the plan relays it."""
        if site in self.state.active.plan.relay:
            self.converged[site] = Converged(round_, values, live_rows, requests)

    # -- last stage ------------------------------------------------------------------------
    @serves("pp_send")
    def prepare_tensor_dict(self, original, scheduler, result, batch):
        tensors = original(scheduler, result, batch)
        rt = self.state.active.runtime
        done, self.converged = self.converged, {}
        if rt is None:
            return tensors
        for site, c in done.items():
            tensors[KEY + site] = rt.relay_out(site, c.values, round=c.round, live_rows=c.live_rows,
                                               requests=c.requests)
        return tensors

    # -- earlier stages --------------------------------------------------------------------
    @serves("pp_receive")
    def prep_batch_result(self, original, scheduler, batch, mb_metadata, pp_outputs):
        rt = self.state.active.runtime
        if rt is None or scheduler.pp_group.is_last_rank or batch.forward_mode.is_idle():
            return original(scheduler, batch, mb_metadata, pp_outputs)
        from specplan.plugins.common import fit_rows, wants_identity
        from specplan.plugins.sglang_sites import batch_rows

        plan, tensors = self.state.active.plan, pp_outputs.tensors
        carried = [r.site for r in plan.relays if KEY + r.site in tensors]
        # The rows the message answers: the snapshot of the batch that ran the forward (the
        # live batch may have been merged or filtered since), their generations read now.
        fwd = getattr(mb_metadata, "fwd_batch", None)
        fwd = batch if fwd is None else fwd
        self._check_kind(fwd, carried)
        live = len(fwd.reqs)
        requests = fit_rows(batch_rows(fwd), live) if wants_identity(rt) else None
        for site in sorted(carried, key=lambda s: ORDER.get(plan.site[s].phase, len(ORDER))):
            phase = plan.site[site].phase
            out = rt.relay_in(site, tensors[KEY + site], round=self.state.round, live_rows=live,
                              requests=requests)
            _write_back(phase, out, tensors)
            self.state.round += phase == "accept"  # the tail draft is the next round's
            self.checked += 1
        rt.check_round()  # device path: the relays' checks, read before SGLang commits
        return original(scheduler, batch, mb_metadata, pp_outputs)

    def _check_kind(self, batch, carried: list[str]) -> None:
        """A decode batch's message carries the accept relay, an extend batch's none: else the
        stages disagree on which batch the message answers (a DesyncError, before any commit)."""
        accept = self.state.eagle_site()
        if accept is None or accept.boundary is None or accept.name not in self.state.active.plan.relay:
            return
        decode = batch.forward_mode.is_decode() or batch.forward_mode.is_target_verify()
        if decode == (accept.name in carried):
            return
        from specplan.runtime.errors import DesyncError

        kind, has = ("a decode", "no") if decode else ("an extend", "an")
        raise DesyncError(
            f"PP relay of {accept.name} at round {self.state.round}: rank "
            f"{self.state.active.runtime.rank} processes {kind} batch of {len(batch.reqs)} rows "
            f"(requests {[r.rid for r in batch.reqs][:8]}), and SGLang's message for it carries "
            f"{has} accept relay: the stages disagree on which batch the message answers")


ORDER = {"target": 0, "accept": 1, "draft": 2}  # the order the last stage converges them


def _write_back(phase: str, out: dict, tensors: dict) -> None:
    """SGLang's relayed tensors, written from the plan's relayed decisions (in place)."""
    if phase == "accept":
        correct, index, predict = out["num_correct_drafts"], out["accept_index"], out["predict"]
        _put(tensors, "spec_accept_lens", correct + 1)
        _put(tensors, "spec_accept_index", index)
        last = index.gather(1, correct.long().unsqueeze(1)).squeeze(1)
        _put(tensors, "spec_bonus_tokens", predict[last.long()])
    elif phase == "draft":
        drafts = out["draft_tokens"]
        chain = tensors.get("spec_next_chain")
        if chain is not None:
            chain.view(drafts.shape[0], -1)[:, 1:].copy_(drafts)
        _put(tensors, "spec_next_parents", out.get("parent_list"))
        _put(tensors, "spec_next_top_scores", out.get("top_scores_index"))
    elif phase == "target":
        from specplan.plugins.sglang_draft import HANDS

        _put(tensors, "next_token_ids", out[HANDS["target"][0]])


def _put(tensors: dict, key: str, value) -> None:
    if value is not None and key in tensors:
        t = tensors[key]
        t.copy_(value.to(t.device, t.dtype).reshape(t.shape))
