"""MTP / NextN: the model's own multi-token-prediction layer as the EAGLE drafter.

SGLang resolves NEXTN to the EAGLE algorithm, so the round and every decision are EAGLE's
(reference/decisions.md §1-variants). Multi-layer and frozen-KV MTP keep the same accept
decisions but are outside PP; the draft reads the last hidden state, not taps.
"""

from ._eagle_family import build

MTP = build(
    "mtp", drafter="head", needs_taps=False, title="MTP", own_layers=True,
    doc="MTP/NextN: EAGLE with the checkpoint's MTP layer as the head.",
)
