"""SGLang: everything specplan knows that differs for this engine, in one package.

- this file: the engine's name, how messages spell it, and its supported releases, oldest
  first (the one place a release is written; releases.py, the hook table and the flag tables
  are read by these numbers);
- convention.py: the rank layout as mesh axes, the PP split, DP agreement, MoE rows, the
  refusals, the behaviour profile (`SGLang`), and the speculative algorithm names;
- hooks.py: the functions the plugin hooks, per release; flags/: every launch flag of each
  release's parser;
- launch.py: the launch-line tables (program, launchers, environment, the modelled flags, the
  disaggregation flags); defaults.py: the widths SGLang picks when a line leaves them out;
- spec_tp_sync.py: SGLANG_SPEC_TP_SYNC both ways; handoff.py: its PD KV handoff rules.

No imports here: the release table is read while the package's modules are still loading.
"""

NAME = "sglang"
TITLE = "SGLang"
RELEASES = ("0.5.20", "0.5.21", "0.5.22", "0.5.23")

# Rules that changed between releases: the first release with the newer rule (each measured on
# the releases' own wheels, tests/engines/test_release_rules.py).
# 0.5.20 arg_groups/validation_hook.py check_server_args refuses every speculative algorithm
# under pp_size > 1 off NPU, and has no SGLANG_ENABLE_PP_SPEC (environ.py); 0.5.21 on
# (check_pipeline_parallel_compat) runs EAGLE / NEXTN under PP.
PP_SPEC_FROM = "0.5.21"
# arg_groups/parallel_hook.py handle_context_parallelism, with attn_cp_size > 1: 0.5.20 and
# 0.5.21 assert tp_size % (dp_size * attn_cp_size) == 0, plain DP replicas counted; 0.5.22 on
# assert tp_size % (attn_dp_size * attn_cp_size) == 0, DP-attention's replicas only.
CP_COUNTS_ATTN_DP_FROM = "0.5.22"
