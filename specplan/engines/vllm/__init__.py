"""vLLM: everything specplan knows that differs for this engine, in one package.

- this file: the engine's name, how messages spell it, and its supported releases, oldest
  first (the one place a release is written; releases.py, the flag tables and the hook
  tables are read by these numbers);
- convention.py: the rank layout as mesh axes, the PP split, DP agreement, MoE rows, the
  refusals, the behaviour profile (`VLLM`), and the speculative method names;
- hooks.py: the functions the plugin wraps, one table per release line; flags/: every launch
  flag of each release's parser;
- launch.py: the launch-line tables (program, launchers, environment, the modelled flags, the
  disaggregation flags); defaults.py: the widths vLLM picks when a line leaves them out;
- handoff.py: its PD KV handoff rules, one strategy per connector.

No imports here: the release table is read while the package's modules are still loading.
"""

NAME = "vllm"
TITLE = "vLLM"
RELEASES = ("0.30.0", "0.31.0", "0.32.0", "0.33.0")
