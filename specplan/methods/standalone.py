"""STANDALONE: the EAGLE round driven by an independent small draft model.

The draft has its own embedding and head and reads no target hidden state
(CaptureHiddenMode.NULL); decisions are EAGLE's (reference/decisions.md §1-variants).
"""

from ._eagle_family import build

STANDALONE = build(
    "standalone", drafter="model", needs_taps=False, title="standalone",
    doc="Standalone draft model through the EAGLE worker.",
)
