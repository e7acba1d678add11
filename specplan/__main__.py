"""`python -m specplan`: the command line (torchrun -m specplan simulate SPEC runs one rank)."""

from specplan.cli import main

main()
