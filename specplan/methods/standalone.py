"""STANDALONE: the EAGLE round driven by an independent small draft model.

The draft has its own embedding and head and reads no target hidden state
(CaptureHiddenMode.NULL); decisions are EAGLE's (reference/decisions.md §1-variants).
"""

from ._common import vllm_supported
from ._eagle_family import build

STANDALONE = build(
    "standalone", drafter="model", needs_taps=False,
    engine_notes={
        "sglang_pp": "no",
        **vllm_supported("draft_model", "chain only"),
    },
    doc="Standalone draft model through the EAGLE worker.",
)
