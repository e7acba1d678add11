"""EAGLE, chain (topk == 1) and tree (topk > 1): a head reading the target's last hidden state.

The round is the shared EAGLE one (_eagle_family.py, reference/decisions.md §1). A chain is the
same records with `tree_only` topology decisions constant and the tree-path compaction an
identity; it needs num_draft_tokens == num_steps + 1 for SGLang's chain fast path.
"""

from ._eagle_family import build

EAGLE = build(
    "eagle", drafter="head", needs_taps=False, title="EAGLE", without_draft="mtp",
    doc="EAGLE: S-1 draft forwards of a head over the last hidden state, tree or chain verify.",
)
