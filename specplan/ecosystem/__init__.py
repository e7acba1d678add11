"""Engine launch lines both ways: `specplan export` (spec -> SGLang / vLLM command line and
environment) and `specplan import` (command line -> spec). Torch-free; the flag names live in
flags.py, read from the SGLang 0.5.23 and vLLM 0.33.0 wheels."""
