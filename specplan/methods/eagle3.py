"""EAGLE3: the EAGLE round with a drafter that reads taps (aux hidden states), not the last one.

Control flow and decisions are EAGLE's (reference/decisions.md §1-variants); only the draft
input width differs (hidden * number of taps, 3 by default). SGLang excludes it from PP.
"""

from ._common import engine_notes
from ._eagle_family import build

EAGLE3 = build(
    "eagle3", drafter="head", needs_taps=True, title="EAGLE3",
    engine_names={"sglang": "EAGLE3", "vllm": "eagle3"},
    engine_notes=engine_notes("chain only; PP with chained tap relay in Model Runner V2", pp="no"),
    doc="EAGLE3: EAGLE with a tap-reading head (default taps 2, L/2, L-3 in vLLM).",
)
