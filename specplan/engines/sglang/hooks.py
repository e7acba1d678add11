"""The SGLang functions the specplan plugin hooks or calls, per supported release (data).

Each target (under `sglang.srt.`), by its role (engines/hooks.py: the plugin asks the table by
role, and each of its hook bodies declares the role it serves, plugins/roles.py), with the
parameter names of its definition in each release's wheel (read from the source with `ast` by tests/engines/test_sglang_hooks.py: marker `engines`
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

from specplan.engines.hooks import Hook, HookTable
from specplan.engines.releases import RELEASES, check, newest
from specplan.engines.sglang import NAME

SRT = "sglang.srt"

# role: what the plugin does there (its body declares the role: plugins/sglang*.py `@serves`).
# Module under sglang.srt., qualified name, the parameter names of its definition.
BASE = HookTable(NAME, newest(NAME), (
    Hook('world', SRT + '.distributed.parallel_state', 'initialize_model_parallel',
         '(backend, duplicate_tp_group, enable_symm_mem, recovered_rank, rank_offset, max_world_size)'),
    Hook('group', SRT + '.distributed.parallel_state', 'init_model_parallel_group',
         '(group_ranks, local_rank, backend, use_pynccl, use_custom_allreduce, use_message_queue_broadcaster, group_name, use_mscclpp, use_torch_symm_mem_allreduce, recovered_rank, rank_offset, max_world_size)'),
    Hook('spec_tp_sync', SRT + '.speculative.spec_tp_sync', 'SpecTpSync.sync',
         '(self, site, values)'),
    Hook('spec_tp_sync_enabled', SRT + '.speculative.spec_tp_sync', 'SpecTpSync.enabled',
         '(self, site)'),
    Hook('available_memory', SRT + '.speculative.spec_tp_sync', 'SpecTpSync.available_memory_gb',
         '(self, site, device, gpu_id, group)'),
    Hook('accept', SRT + '.speculative.eagle_utils', 'eagle_sample',
         '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k, watermark_state, watermark_full_mask)'),
    Hook('group_broadcast', SRT + '.distributed.parallel_state', 'GroupCoordinator.broadcast',
         '(self, input_, src)'),
    Hook('verify_lens', SRT + '.speculative.dspark_components.dspark_planner', 'DSparkVerifyPlanner._schedule_verify_lens',
         '(self, req_pool_indices, prefix_lens, device, confidence, budget)'),
    Hook('markov_draft', SRT + '.speculative.dspark_components.dspark_draft', 'draft_markov_block',
         '(markov_head, base_logits, anchor_tokens, draft_hidden, step_temperatures, noise, tp_sync, logits_out, greedy_draft)'),
    Hook('dspark_forward', SRT + '.speculative.dspark_components.dspark_worker_v2', 'DSparkWorkerV2.forward_batch_generation',
         '(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)'),
    Hook('dflash_forward', SRT + '.speculative.dflash_worker_v2', 'DFlashWorkerV2.forward_batch_generation',
         '(self, batch, on_publish, grammar_barrier, pp_proxy_tensors)'),
    Hook('decode_result', SRT + '.managers.scheduler_components.batch_result_processor', 'SchedulerBatchResultProcessor.process_batch_result_decode',
         '(self, batch, result)'),
    Hook('prefill_result', SRT + '.managers.scheduler_components.batch_result_processor', 'SchedulerBatchResultProcessor.process_batch_result_prefill',
         '(self, batch, result)'),
    Hook('eagle_draft', SRT + '.speculative.eagle_worker_common', 'build_eagle_verify_input',
         '(batch, draft_input, parent_list, top_scores_index, draft_tokens, draft_probs, target_worker, topk, num_steps, num_draft_tokens, tree_mask_mode, device)'),
    Hook('eagle_draft_extend', SRT + '.speculative.eagle_worker_v2', 'EagleDraftWorker._draft_extend_for_decode',
         '(self, batch, batch_result, kv_loc_plan)'),
    Hook('eagle_target', SRT + '.speculative.eagle_worker_v2', 'EagleDraftWorker._draft_extend_for_prefill',
         '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds, kv_loc_plan)'),
    Hook('ngram_draft', SRT + '.speculative.ngram_worker', 'NGRAMWorker._prepare_draft_tokens',
         '(self, batch)'),
    Hook('pp_send', SRT + '.managers.scheduler_pp_mixin', 'SchedulerPPMixin._pp_prepare_tensor_dict',
         '(self, result, batch)'),
    Hook('pp_receive', SRT + '.managers.scheduler_pp_mixin', 'SchedulerPPMixin._pp_prep_batch_result',
         '(self, batch, mb_metadata, pp_outputs)'),
    Hook('register', SRT + '.plugins.hook_registry', 'HookRegistry.register',
         '(cls, target, hook, hook_type, source)', wrapped=False),
))
# a release -> the roles whose signature differs there (None: that release has no such
# function); a release not listed has the base's signatures
OLDER: dict[str, dict[str, str | None]] = {
    '0.5.20': {
        'world':
            '(tensor_model_parallel_size, expert_model_parallel_size, pipeline_model_parallel_size, attention_data_parallel_size, attention_context_model_parallel_size, moe_data_model_parallel_size, decode_context_parallel_size, backend, duplicate_tp_group, enable_symm_mem, recovered_rank, rank_offset, max_world_size)',
        'group':
            '(group_ranks, local_rank, backend, use_pynccl, use_custom_allreduce, use_message_queue_broadcaster, group_name, use_mscclpp_allreduce, use_torch_symm_mem_allreduce, recovered_rank, rank_offset, max_world_size)',
        'accept':
            '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k)',
        'markov_draft':
            None,
        'dspark_forward':
            '(self, batch, on_publish, grammar_barrier)',
        'eagle_draft_extend':
            '(self, batch, batch_result)',
        'eagle_target':
            '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds)',
    },
    '0.5.21': {
        'accept':
            '(verify_input, batch, logits_output, grammar_mask, uno_target_max_top_k)',
        'markov_draft':
            None,
        'eagle_draft_extend':
            '(self, batch, batch_result)',
        'eagle_target':
            '(self, batch, target_hidden_states, next_token_ids, mm_input_embeds)',
    },
}


def table(version: str | None = None) -> HookTable:
    """The hooks of `version` (None: the newest), by role."""
    version = check(NAME, version)
    return BASE.differs(version, OLDER.get(version, {}))


def hooks(version: str | None = None) -> dict[str, str | None]:
    """target under sglang.srt. -> its parameter list at `version` (None: absent there)."""
    present = {h.role: h.signature for h in table(version).hooks}
    return {_under_srt(h): present.get(h.role) for h in BASE.hooks}


def _under_srt(hook: Hook) -> str:
    return hook.target.removeprefix(SRT + ".")


# target -> an older signature the plugin's hook serves as well (none yet: the plugin's hooks
# are written against the base's). A difference listed here makes its releases installable.
HANDLED: dict[str, tuple[str, ...]] = {}


def unhandled(version: str) -> dict[str, str | None]:
    """The targets whose signature at `version` differs from the base's and is not HANDLED."""
    base = hooks()
    return {t: sig for t, sig in hooks(version).items()
            if sig != base[t] and sig not in HANDLED.get(t, ())}


def plugin_releases() -> tuple[str, ...]:
    """The releases, oldest first, whose every difference the plugin handles."""
    return tuple(v for v in RELEASES[NAME] if not unhandled(v))


def plugin_refusal(version: str) -> str | None:
    """One line naming what the plugin does not handle at a supported `version` (None: the
    plugin runs there, or `version` is not a release of the table)."""
    if version not in RELEASES[NAME] or not unhandled(version):
        return None
    base = {_under_srt(h): h.signature for h in BASE.hooks}  # hooks(): the newest has each
    parts = [f"{t} {_difference(base[t], sig)}" for t, sig in unhandled(version).items()]
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
