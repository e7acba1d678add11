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
