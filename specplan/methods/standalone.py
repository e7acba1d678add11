"""STANDALONE: the EAGLE round driven by an independent small draft model.

The draft has its own embedding and head and reads no target hidden state
(CaptureHiddenMode.NULL); decisions are EAGLE's (reference/decisions.md §1-variants).
"""

from ._common import engine_notes
from ._eagle_family import build

STANDALONE = build(
    "standalone", drafter="model", needs_taps=False, title="standalone",
    engine_names={"sglang": "STANDALONE", "vllm": "draft_model"},
    engine_notes=engine_notes("chain only", pp="no"),
    doc="Standalone draft model through the EAGLE worker.",
)
