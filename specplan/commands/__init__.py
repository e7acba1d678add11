"""The commands, one module per verb, each written once over a `Target` (target.py): a spec
(spec_target.py) or a deployment (deployment.py), picked in load.py. Each verb module has one
value function (the command without its printing: its refusals, bounds and value) and `run`,
which loads the target, calls it, prints and returns the exit code. cli.py declares the
options and calls `run`; api.py calls the same value function and returns its value; nothing
here imports cli or api."""
