"""Per-rank trace files: reading them (read.py) and finding where ranks first diverge (diff.py)."""
