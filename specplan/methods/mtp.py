"""MTP / NextN: the model's own multi-token-prediction layer as the EAGLE drafter.

SGLang resolves NEXTN to the EAGLE algorithm, so the round and every decision are EAGLE's
(reference/decisions.md §1-variants). Multi-layer and frozen-KV MTP keep the same accept
decisions but are outside PP; the draft reads the last hidden state, not taps.
"""

from ._common import engine_notes
from ._eagle_family import build

MTP = build(
    "mtp", drafter="head", needs_taps=False, title="MTP", own_layers=True,
    # vLLM's MTPModelTypes ("deepseek_mtp", ...) all read back as mtp (ecosystem/launch_read.py).
    engine_names={"sglang": "NEXTN", "vllm": "mtp"},
    # decisions.md §1/§7: NEXTN resolves to EAGLE, which is what the PP gate checks;
    # multi-layer and frozen-KV MTP are excluded.
    engine_notes=engine_notes("chain only", pp="yes",
                              pp_note="single-layer NextN only (resolves to EAGLE); multi-layer "
                                      "and frozen-KV MTP are excluded from PP"),
    doc="MTP/NextN: EAGLE with the checkpoint's MTP layer as the head.",
)
