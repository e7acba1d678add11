"""The CPU dry-run engine behind `specplan simulate`: a tiny float64 model, one process per
rank, every decision through the compiled plan's runtime (see specplan.sim.launch)."""
