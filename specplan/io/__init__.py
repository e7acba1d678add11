"""Bounded file reads, atomic writes, staged folders written all together or none."""
