"""EAGLE3: the EAGLE round with a drafter that reads taps (aux hidden states), not the last one.

Control flow and decisions are EAGLE's (reference/decisions.md §1-variants); only the draft
input width differs (hidden * number of taps, 3 by default).
"""

from ._eagle_family import build

EAGLE3 = build(
    "eagle3", drafter="head", needs_taps=True, title="EAGLE3",
    doc="EAGLE3: EAGLE with a tap-reading head (default taps 2, L/2, L-3 in vLLM).",
)
