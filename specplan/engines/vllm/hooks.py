"""vLLM's functions the specplan plugin wraps or calls, one table per supported release (data).

Each `Hook` (engines/hooks.py) names its role, a target (its module, then its qualified name
inside it) and the signature `inspect.signature` prints for it with annotations dropped; the
plugin's body for a role declares it (plugins/roles.py `serves`), with the signature where a
release changed it (0.32's `pp_receive`). The plugin checks every entry of its release's
table when it installs its hooks (plugins/vllm_guard.py): a target missing or with another
signature refuses the start with one line naming the function, both signatures and the engine
version. Torch-free: read on a laptop as well (docs/engines.md prints the tables).

0.33.0 is the base (0.32.x, 0.31.x and 0.30.x are each the next newer one plus their
differences, below); 0.32.x differs in how PPHandler relays the drafts (read from both wheels'
v1/worker/gpu/pp_utils.py and model_runner.py; parallel_state, the V2 RejectionSampler,
AsyncOutput and init_speculator agree):

- `receive(self, input_batch)`: drafts are received on every step that samples a row whenever
  the engine speculates (num_speculative_steps > 0), and sampled tokens are always
  max_sample_len = K + 1 wide (0.33.0: `receive(self, input_batch, recv_drafts)`, drafts when
  the step proposed some, width `_sample_len`: K + 1 with drafts in the step, else 1);
- `broadcast_drafts(self, draft_tokens, input_batch)`: the whole request-state table, sent at
  `input_batch.idx_mapping`, skipped when no row samples, also on a step that proposed no drafts
  (0.33.0: `broadcast_drafts(self, draft_tokens)`, the step's rows, only when the step's sampled
  tokens went out: `sampled_tokens_broadcast`);
- no `PPHandler._sample_len`, no `sampled_tokens_broadcast`;
- `get_prev_sampled_outputs(self, draft_tokens_to_update=None)` writes the received drafts into
  the request states itself (not hooked: it reads the plugin's PendingRecv like vLLM's own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from specplan.engines.hooks import Hook, HookTable
from specplan.engines.vllm import NAME

PS = "vllm.distributed.parallel_state"
GPU = "vllm.v1.worker.gpu"
PP_UTILS = f"{GPU}.pp_utils"
SAMPLER = f"{GPU}.spec_decode.rejection_sampler"
SPEC_DECODE = f"{GPU}.spec_decode"
SPECULATOR = f"{GPU}.spec_decode.speculator"
ASYNC = f"{GPU}.async_utils"
RUNNER = f"{GPU}.model_runner"
DP_UTILS = f"{GPU}.dp_utils"
BATCH_SHARD = f"{GPU}.sample.batch_shard"


@dataclass(frozen=True)
class Release(HookTable):
    """A vLLM release line the plugin was tested against: its hooks (by role) and how its PP
    relay acts. `drafts_every_sampled_step`: the last stage relays drafts on every step that
    samples a row (0.32: also a step that proposed none), not only when the step proposed drafts."""

    drafts_every_sampled_step: bool = False

    def matches(self, version: str) -> bool:
        return _numbers(version)[: _depth(self.version)] == _numbers(self.version)[: _depth(self.version)]


_PROPOSE = ("(self, input_batch, attn_metadata, slot_mappings, last_hidden_states, aux_hidden_states, "
            "num_sampled, num_rejected, last_sampled, next_prefill_tokens, temperature, seeds, "
            "dp_sync_state=None, dummy_run=False, skip_attn_for_dummy_run=False, mm_inputs=None, "
            "is_profile=False, num_speculative_tokens=None)")

# role: what the plugin does there (its body declares the role: plugins/vllm.py, vllm_pp.py)
V0_33_0 = Release(NAME, "0.33.0", (
    Hook("world", PS, "initialize_model_parallel",
         "(tensor_model_parallel_size=1, pipeline_model_parallel_size=1, "
         "prefill_context_model_parallel_size=1, decode_context_model_parallel_size=1, backend=None)"),
    Hook("accept", SAMPLER, "RejectionSampler.__call__",
         "(self, logits, input_batch, draft_logits=None, invalid_drafts=None)"),
    Hook("pp_broadcast", PP_UTILS, "PPHandler.broadcast",
         "(self, sampled_token_ids, num_sampled, num_rejected, input_batch)"),
    Hook("pp_receive", PP_UTILS, "PPHandler.receive", "(self, input_batch, recv_drafts)"),
    Hook("pp_broadcast_drafts", PP_UTILS, "PPHandler.broadcast_drafts", "(self, draft_tokens)"),
    Hook("pp_req_idx_freed", PP_UTILS, "PPHandler.on_req_idx_freed", "(self, req_idx)"),
    Hook("pp_prev_outputs", PP_UTILS, "PPHandler.get_prev_sampled_outputs", "(self)"),
    Hook("output", ASYNC, "AsyncOutput.get_output", "(self)"),
    Hook("init_speculator", SPEC_DECODE, "init_speculator", "(vllm_config, device, req_states)"),
    Hook("propose", SPECULATOR, "BaseSpeculator.propose", _PROPOSE),
    # the gates the plugin guards per step (plugins/vllm_gates.py): dispatch_cg_and_sync_dp
    # calls sync_cudagraph_and_dp_padding through its module, so every caller meets the hook
    Hook("dp_sync", DP_UTILS, "sync_cudagraph_and_dp_padding",
         "(cudagraph_manager, desired_batch_desc, num_tokens, num_reqs, uniform_token_count, "
         "dp_size, dp_rank, max_query_len=None, num_active_loras=0, parallel_config=None, "
         "allow_ubatching=False, uniform_decode=False, allow_skip_drafts=False)"),
    Hook("batch_shard", BATCH_SHARD, "BatchSharder.shard_sampler_inputs",
         "(self, input_batch, grammar_output)"),
    Hook("pp_sample_len", PP_UTILS, "PPHandler._sample_len", "(self, input_batch)", wrapped=False),
    Hook("need_sampled_mask", PP_UTILS, "compute_need_sampled_mask", "(input_batch)", wrapped=False),
    Hook("pending_recv", PP_UTILS, "PendingRecv",
         "(event, sampled_tokens, num_sampled, num_rejected, idx_mapping, idx_mapping_np, "
         "need_sampled_mask, gen_at_receive_np, draft_tokens=None)", wrapped=False),
))

V0_32 = replace(V0_33_0.differs("0.32.x", {
    "pp_receive": "(self, input_batch)",
    "pp_broadcast_drafts": "(self, draft_tokens, input_batch)",
    "pp_prev_outputs": "(self, draft_tokens_to_update=None)",
    "pp_sample_len": None,
    # no skip-drafts vote in the DP sync (read from the 0.32.0 and 0.31.0 wheels)
    "dp_sync": "(cudagraph_manager, desired_batch_desc, num_tokens, num_reqs, uniform_token_count, "
               "dp_size, dp_rank, max_query_len=None, num_active_loras=0, parallel_config=None, "
               "allow_ubatching=False, uniform_decode=False)",
}), drafts_every_sampled_step=True)

# 0.31.x: 0.32's PPHandler (pp_utils.py is the same file), and three signatures older (read from
# the 0.31.0 wheel): the V2 RejectionSampler takes no invalid_drafts, init_speculator no
# req_states, BaseSpeculator.propose spells dp_sync_state dp_sync and takes no
# num_speculative_tokens (every propose call drafts the configured K; the plugin converges it).
_PROPOSE_0_31 = _PROPOSE.replace("dp_sync_state=None", "dp_sync=None").replace(
    ", num_speculative_tokens=None)", ")")
V0_31 = V0_32.differs("0.31.x", {
    "accept": "(self, logits, input_batch, draft_logits=None)",
    "init_speculator": "(vllm_config, device)",
    "propose": _PROPOSE_0_31,
})
# 0.30.x: 0.31's signatures throughout; its pp_utils differs only inside functions vLLM itself
# calls (compute_need_sampled_mask does not yet leave out a final prefill chunk that reaches the
# length cap; the ring is always pp deep), which the plugin reads through vLLM's own functions.
V0_30 = replace(V0_31, version="0.30.x")

RELEASES: tuple[Release, ...] = (V0_30, V0_31, V0_32, V0_33_0)  # oldest first


def release_for(version: str) -> Release | None:
    """The table of a supported vLLM version (a local build label such as +cpu ignored)."""
    return next((r for r in RELEASES if r.matches(version)), None)


def nearest_release(version: str) -> Release:
    """An untested version's table (SPECPLAN_ALLOW_UNTESTED_ENGINE=1): the newest release not
    after it, else the oldest. Its signatures are still checked."""
    found = release_for(version)
    if found is not None:
        return found
    older = [r for r in RELEASES if _numbers(r.version) <= _numbers(version)]
    return older[-1] if older else RELEASES[0]


def _numbers(version: str) -> tuple[int, ...]:
    """0.32.0+cpu -> (0, 32, 0); "x" and anything after the numbers end the tuple."""
    out = []
    for part in version.split("+")[0].split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        out.append(int(m.group()))
    return tuple(out)


def _depth(pattern: str) -> int:
    return len(_numbers(pattern))
