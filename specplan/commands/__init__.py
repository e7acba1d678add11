"""The commands, one module per verb, each written once over a `Target` (target.py): a spec
(spec_target.py) or a deployment (deployment.py), picked in load.py. Each command loads its
target, runs the planner, the verifier or the sim, prints and returns the exit code. cli.py
declares their options (and turns bad input into exit 2); api.py returns the same values to
Python; nothing here imports cli or api."""
