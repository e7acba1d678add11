"""The SGLang plugin's draft hooks for the sites the plan converges and SGLang 0.5.23 converges
nowhere: `<method>_target` (the prefill's first token), `<method>_draft` and
`<method>_draft_extend` (eagle, eagle3, mtp, standalone), and `ngram_draft`.

Each is hooked at the function that produces (or first consumes) the site's decisions, and
converges them as the plan's boundary (one guarded collective over the plan's group, from the
plan's source), written back in place into SGLang's own tensors:

- `<method>_target`: `eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill`, which
  EAGLEWorkerV2._forward_prefill_batch (StandaloneWorkerV2 by inheritance) calls right after
  the target's prefill forward with its sampled `next_token_ids [bs]`. SGLang samples that
  first token on every TP rank with the same seed and never converges it; the hook converges
  it on entry, so the draft extend's tail tokens, the next round's bonus tokens and the
  `batch_output.next_token_ids` SGLang commits (the same tensor) are the source's.
  MultiLayerEagleWorkerV2 and FrozenKVMTPWorkerV2 reach their first token through their own
  draft workers' `_draft_extend_for_prefill` (not EagleDraftWorker's): not hooked.
- `<method>_draft`: `eagle_worker_common.build_eagle_verify_input`, the one tail every draft
  path runs (EagleDraftWorker.draft with or without its draft CUDA graph, topk 1 or a tree,
  StandaloneWorkerV2 by inheritance, MultiLayerEagleWorkerV2). Its arguments are what
  `organize_draft_results` (or the topk-1 chain path, or the graph) produced:
  `draft_tokens [bs, num_draft_tokens - 1]`, `parent_list [bs, (num_steps - 1) * topk + 1]`,
  `top_scores_index [bs, num_draft_tokens - 1]`. They are converged before SGLang builds the
  tree from them, so the tree mask, positions and retrieve indices the target's verify reads
  are the source's on every rank. A chain plan (topk 1) carries `draft_tokens` only: the
  chain's parents and indices are the same constants on every rank.
- `<method>_draft_extend`: `eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode`, which
  writes the next round's `topk_index` / `topk_p [bs, topk]` into
  `batch_result.next_draft_input`; they are converged when it returns.

and one NGRAM site:

- `ngram_draft`: `ngram_worker.NGRAMWorker._prepare_draft_tokens`, which makes each TP rank's
  drafts on the host from that rank's own n-gram corpus (`NgramCorpus.batch_get`) and returns
  them as numpy arrays, `req_drafts [bs * num_draft_tokens]` (int64) and
  `mask [bs * num_draft_tokens * num_draft_tokens]` (int64 0/1), which
  `_prepare_for_speculative_decoding` copies into its `draft_tokens` / `tree_mask` tensors.
  Ranks whose corpora differ (an external corpus committed at other times, per-rank match
  state) would verify different trees across the target's all-reduce. The hook converges both
  arrays when the original returns, as the plan's `draft_tokens` / `tree_mask` (the mask as
  bool), and returns the source's arrays in SGLang's own shapes and dtypes. The drafts are host
  data: on a GPU the converged arrays come back to the host once per round (one device-to-host
  copy), where SGLang's draft preparation is host-bound already (under the overlap scheduler it
  first reads the previous round's accepted tokens back with `.cpu()`).

The hooks are registered only for a plan that converges the site (a boundary of an EAGLE-family
method, or NGRAM's draft), so a DSpark or DFlash deployment, or a no-op site, gets none. A
boundary the plan fused with other sites, or tensors of another width than the plan's, fall
back to one plain broadcast per tensor over the plan's group from the plan's source (the right
values, no guard header).
Idle batches (DP-attention) are not converged: the whole replica is idle together.
"""

from __future__ import annotations

from specplan.engines.sglang.hooks import table
from specplan.plugins.roles import ATTR, serves

# The methods SGLang runs through each worker are its rows' (engines/sglang/methods.py `worker`).
EAGLE_FAMILY = "eagle_worker"
TABLE = table()  # the newest release's (the plugin refuses the others: engines/sglang/hooks.py)
DRAFT, DRAFT_EXTEND, TARGET = (TABLE.target(r) for r in ("eagle_draft", "eagle_draft_extend",
                                                          "eagle_target"))
NGRAM = "ngram_worker"
NGRAM_DRAFT = TABLE.target("ngram_draft")
# The decisions each hook hands, by the plan site's phase (the plan names them alike).
HANDS = {"target": ("next_token_ids",), "draft": ("draft_tokens", "parent_list", "top_scores_index"),
         "draft_extend": ("topk_index", "topk_p"), "ngram_draft": ("draft_tokens", "tree_mask")}


def draft_hooks(state) -> list[tuple[str, object]]:
    """(target, AROUND hook) for each EAGLE-family or NGRAM site here the plan converges."""
    hooks = DraftHooks(state)
    wanted = (("target", EAGLE_FAMILY, hooks.draft_extend_for_prefill),
              ("draft", EAGLE_FAMILY, hooks.build_eagle_verify_input),
              ("draft_extend", EAGLE_FAMILY, hooks.draft_extend_for_decode),
              ("draft", NGRAM, hooks.prepare_draft_tokens))
    return [(TABLE.target(role), hook) for phase, worker, hook in wanted
            for role, _ in getattr(hook, ATTR) if hooks.site(phase, worker) is not None]


class DraftHooks:
    """The four hooks; `state` is the plugin's SGLangState (its `active` plan and `round`)."""

    def __init__(self, state):
        self.state = state
        self.converged = {"target": 0, "draft": 0, "draft_extend": 0}  # guarded collectives issued
        self.broadcasts = {"target": 0, "draft": 0, "draft_extend": 0}  # fallback tensors broadcast

    def site(self, phase: str, worker: str = EAGLE_FAMILY):
        """The plan's `<method>_<phase>` when SGLang runs the method through `worker` and the
        site converges."""
        from specplan.engines.sglang.methods import ROWS

        plan = self.state.active.plan
        method = plan.speculative.method
        ps = plan.site.get(f"{method}_{phase}") if ROWS[method].worker == worker else None
        return ps if ps is not None and ps.boundary is not None else None

    @serves("eagle_target")
    def draft_extend_for_prefill(self, original, worker, batch, target_hidden_states, next_token_ids,
                                 *args, **kwargs):
        """<method>_target: the prefill's first token, converged before the draft extend reads it."""
        if self.state.active.runtime is not None and not batch.forward_mode.is_idle():
            self._converge("target", batch, dict(zip(HANDS["target"], (next_token_ids,))))
        return original(worker, batch, target_hidden_states, next_token_ids, *args, **kwargs)

    @serves("eagle_draft")
    def build_eagle_verify_input(self, original, batch, draft_input, parent_list, top_scores_index,
                                 draft_tokens, draft_probs=None, **kwargs):
        """<method>_draft: the draft tree converged before SGLang builds the verify input."""
        if self.state.active.runtime is not None and not batch.forward_mode.is_idle():
            self._converge("draft", batch, dict(zip(HANDS["draft"], (draft_tokens, parent_list,
                                                                     top_scores_index))))
        return original(batch, draft_input, parent_list, top_scores_index, draft_tokens, draft_probs,
                        **kwargs)

    @serves("eagle_draft_extend")
    def draft_extend_for_decode(self, original, worker, batch, batch_result, *args, **kwargs):
        """<method>_draft_extend: the next round's top-k, converged when SGLang has written it."""
        result = original(worker, batch, batch_result, *args, **kwargs)
        nxt = getattr(batch_result, "next_draft_input", None)
        if self.state.active.runtime is not None and nxt is not None and not batch.forward_mode.is_idle():
            values = (nxt.topk_index, nxt.topk_p)
            self._converge("draft_extend", batch, dict(zip(HANDS["draft_extend"], values)))
        return result

    @serves("ngram_draft")
    def prepare_draft_tokens(self, original, worker, batch, *args, **kwargs):
        """ngram_draft: each rank's host-side n-gram drafts (req_drafts, mask), converged when
        SGLang has made them; the source's arrays come back in SGLang's shapes and dtypes."""
        import numpy as np
        import torch

        req_drafts, mask = original(worker, batch, *args, **kwargs)
        rt, bs = self.state.active.runtime, len(batch.reqs)
        if rt is None or bs == 0:
            return req_drafts, mask
        ps = self.site("draft", NGRAM)
        arrays = dict(zip(HANDS["ngram_draft"], (req_drafts, mask)))
        shapes = {f.decision: rt.plan.live_shape(f, bs) for f in rt.plan.boundary_of(ps.name).fields}
        fits = all(n in shapes and a.size == int(np.prod(shapes[n])) for n, a in arrays.items())
        mine = {n: torch.from_numpy(np.ascontiguousarray(a)).to(rt.device).reshape(shapes[n] if fits else -1)
                for n, a in arrays.items()}
        self._converge("draft", batch, mine, rows=bs, site=ps, whole=fits)  # written back into `mine`
        return tuple(mine[n].cpu().numpy().reshape(a.shape) for n, a in arrays.items())

    def _converge(self, phase: str, batch, tensors: dict, *, rows=None, site=None, whole=True) -> None:
        """One guarded collective of the site's boundary; every tensor gets the source's values
        (written back in place). `rows`: the live rows (default: the tensors' leading dim);
        `site`: the plan site (default: the EAGLE-family one); `whole=False`: plain broadcasts."""
        import specplan.runtime.prepared as prepared
        from specplan.plugins.common import fit_rows, wants_identity
        from specplan.plugins.sglang_sites import _broadcast, batch_rows

        rt, ps = self.state.active.runtime, site or self.site(phase)
        boundary = rt.plan.boundary_of(ps.name)
        mine = {d.name: tensors[d.name] for d in ps.decisions if d.name in tensors}
        whole = whole and set(boundary.decisions) == set(mine) and all(
            tuple(mine[f.decision].shape[1:]) == tuple(f.shape[1:]) for f in boundary.fields)
        if not whole:  # fused with other sites, or another width: plain broadcasts
            for t in mine.values():
                _broadcast(rt, boundary, t)
                self.broadcasts[phase] += 1
            return
        rows = next(iter(mine.values())).shape[0] if rows is None else rows
        requests = fit_rows(batch_rows(batch), rows) if wants_identity(rt) else None
        values = {f.decision: mine[f.decision].to(prepared.DTYPES[f.dtype]) for f in boundary.fields}
        out = rt.converge(ps.name, values, round=self.state.round, live_rows=rows, requests=requests)
        if self.state.pp is not None:  # pipeline parallel: the relay carries what was converged
            self.state.pp.record(ps.name, self.state.round, out, rows, requests)
        for name, t in mine.items():
            t.copy_(out[name])
        self.converged[phase] += 1
