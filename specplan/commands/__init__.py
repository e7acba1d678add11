"""The commands, one module per verb: each loads its target, runs the planner, the verifier or
the sim, prints and returns the exit code. cli.py declares their options (and turns bad input
into exit 2); nothing here imports cli."""
