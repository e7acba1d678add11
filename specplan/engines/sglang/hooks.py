"""The SGLang functions the specplan plugin hooks or calls, per supported release (data).

Each target (under `sglang.srt.`) with the parameter names of its definition in each release's
wheel (read from the source with `ast` by tests/engines/test_sglang_hooks.py: marker `engines`
for the newest, `versions` for the older ones). The newest release is the base; an older one
lists only what differs (None: that release has no such function). The plugin runs on every
release whose targets all have the base's signatures or one in HANDLED (`plugin_releases`,
read by plugins/common.py SUPPORTED_VERSIONS); any other supported release is refused at start
with one line naming each difference (`plugin_refusal`):

- 0.5.22 has the newest signatures of every target;
- 0.5.21: eagle_sample has no watermark_state / watermark_full_mask, EagleDraftWorker's
  _draft_extend_for_decode / _for_prefill no kv_loc_plan, and DSpark has no draft_markov_block;
- 0.5.20: as 0.5.21, and initialize_model_parallel takes the seven sizes as arguments (0.5.21
  on reads them from the server args), init_model_parallel_group's use_mscclpp is
  use_mscclpp_allreduce, DSparkWorkerV2.forward_batch_generation has no pp_proxy_tensors.
"""

from __future__ import annotations

from specplan.engines.releases import RELEASES, check, newest
from specplan.engines.sglang import NAME

BASE: dict[str, str] = {  # the newest release
    'distributed.parallel_state.initialize_model_parallel':
        '(backend, duplicate_tp_group, enable_symm_mem, recovered_rank, rank_offset, max_world_size)',
    'distributed.parallel_state.init_model_parallel_group':
        '(group_ranks, local_rank, backend, use_pynccl, use_custom_allreduce, use_message_queue_broadcaster, group_name, use_mscclpp, use_torch_symm_mem_allreduce, recovered_rank, rank_offset, max_world_size)',
    'speculative.spec_tp_sync.SpecTpSync.sync':
        '(self, site, values)',
    'speculative.spec_tp_sync.SpecTpSync.enabled':
        '(self, site)',
    'speculative.spec_tp_sync.SpecTpSync.available_memory_gb':
        '(self, site, device, gpu_id, group)',
    'speculative.eagle_utils.eagle_sample':
        '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k, watermark_state, watermark_full_mask)',
    'distributed.parallel_state.GroupCoordinator.broadcast':
        '(self, input_, src)',
    'speculative.dspark_components.dspark_planner.DSparkVerifyPlanner._schedule_verify_lens':
        '(self, req_pool_indices, prefix_lens, device, confidence, budget)',
    'speculative.dspark_components.dspark_draft.draft_markov_block':
        '(markov_head, base_logits, anchor_tokens, draft_hidden, step_temperatures, noise, tp_sync, logits_out, greedy_draft)',
    'speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2.forward_batch_generation':
        '(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)',
    'speculative.dflash_worker_v2.DFlashWorkerV2.forward_batch_generation':
        '(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)',
    'managers.scheduler_components.batch_result_processor.SchedulerBatchResultProcessor.process_batch_result_decode':
        '(self, batch, result)',
    'managers.scheduler_components.batch_result_processor.SchedulerBatchResultProcessor.process_batch_result_prefill':
        '(self, batch, result)',
    'speculative.eagle_worker_common.build_eagle_verify_input':
        '(batch, draft_input, parent_list, top_scores_index, draft_tokens, draft_probs, target_worker, topk, num_steps, num_draft_tokens, tree_mask_mode, device)',
    'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode':
        '(self, batch, batch_result, kv_loc_plan)',
    'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill':
        '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds, kv_loc_plan)',
    'speculative.ngram_worker.NGRAMWorker._prepare_draft_tokens':
        '(self, batch)',
    'managers.scheduler_pp_mixin.SchedulerPPMixin._pp_prepare_tensor_dict':
        '(self, result, batch)',
    'managers.scheduler_pp_mixin.SchedulerPPMixin._pp_prep_batch_result':
        '(self, batch, mb_metadata, pp_outputs)',
    'plugins.hook_registry.HookRegistry.register':
        '(cls, target, hook, hook_type, source)',
}
# a release -> the targets that differ there; a release not listed has the base's signatures
OLDER: dict[str, dict[str, str | None]] = {
    '0.5.20': {
        'distributed.parallel_state.initialize_model_parallel':
            '(tensor_model_parallel_size, expert_model_parallel_size, pipeline_model_parallel_size, attention_data_parallel_size, attention_context_model_parallel_size, moe_data_model_parallel_size, decode_context_parallel_size, backend, duplicate_tp_group, enable_symm_mem, recovered_rank, rank_offset, max_world_size)',
        'distributed.parallel_state.init_model_parallel_group':
            '(group_ranks, local_rank, backend, use_pynccl, use_custom_allreduce, use_message_queue_broadcaster, group_name, use_mscclpp_allreduce, use_torch_symm_mem_allreduce, recovered_rank, rank_offset, max_world_size)',
        'speculative.eagle_utils.eagle_sample':
            '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k)',
        'speculative.dspark_components.dspark_draft.draft_markov_block':
            None,
        'speculative.dspark_components.dspark_worker_v2.DSparkWorkerV2.forward_batch_generation':
            '(self, batch, on_publish, grammar_barrier)',
        'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode':
            '(self, batch, batch_result)',
        'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill':
            '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds)',
    },
    '0.5.21': {
        'speculative.eagle_utils.eagle_sample':
            '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k)',
        'speculative.dspark_components.dspark_draft.draft_markov_block':
            None,
        'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_decode':
            '(self, batch, batch_result)',
        'speculative.eagle_worker_v2.EagleDraftWorker._draft_extend_for_prefill':
            '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds)',
    },
}


def hooks(version: str | None = None) -> dict[str, str | None]:
    """target -> its parameter list at `version` (None: absent there)."""
    version = check(NAME, version)
    if version == newest(NAME):
        return dict(BASE)
    return {**BASE, **OLDER.get(version, {})}


# target -> an older signature the plugin's hook serves as well (none yet: the plugin's hooks
# are written against the base's). A difference listed here makes its releases installable.
HANDLED: dict[str, tuple[str, ...]] = {}


def unhandled(version: str) -> dict[str, str | None]:
    """The targets whose signature at `version` differs from the base's and is not HANDLED."""
    return {t: sig for t, sig in hooks(version).items()
            if sig != BASE[t] and sig not in HANDLED.get(t, ())}


def plugin_releases() -> tuple[str, ...]:
    """The releases, oldest first, whose every difference the plugin handles."""
    return tuple(v for v in RELEASES[NAME] if not unhandled(v))


def plugin_refusal(version: str) -> str | None:
    """One line naming what the plugin does not handle at a supported `version` (None: the
    plugin runs there, or `version` is not a release of the table)."""
    if version not in RELEASES[NAME] or not unhandled(version):
        return None
    parts = [f"{t} {_difference(BASE[t], sig)}" for t, sig in unhandled(version).items()]
    return (f"sglang {version}: the plugin's hooks do not fit this release: {'; '.join(parts)} "
            f"(sglang.srt.*, engines/sglang/hooks.py); the plugin runs on SGLang "
            f"{', '.join(plugin_releases())}")


def _difference(base: str, sig: str | None) -> str:
    if sig is None:
        return "is absent"
    have, want = _names(sig), _names(base)
    lacks, extra = [n for n in want if n not in have], [n for n in have if n not in want]
    out = ([f"lacks {', '.join(lacks)}"] if lacks else []) + ([f"takes {', '.join(extra)}"] if extra else [])
    return " and ".join(out) or f"is {sig}"


def _names(sig: str) -> list[str]:
    return [n.strip() for n in sig.strip("()").split(",") if n.strip()]
