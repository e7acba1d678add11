"""Plain decoding: no drafts; each round samples one token per request.

A decode step is a target forward of one row per request that samples, i.e. a verify of zero
drafts, so it uses the `target_verify` compute name. SGLang does not converge the token by
default (reference/decisions.md §0.3, reference/sglang.md §2.1): it all-reduces MIN only with
SYNC_TOKEN_IDS_ACROSS_TP or a grammar.
"""

from ._common import presets_for
from .base import Decision, Method, Phase, Site

_NEXT_TOKEN = Decision(
    "next_token_ids", ("bs",), "int64", "rng", "target", site="none_target",
    derives=("new_seq_lens", "out_tokens", "positions", "cache_locations"),
    doc="The sampled token; rng on the sampling path, float (argmax) when greedy.")

NONE = Method(
    name="none",
    # "target" names the prefill's and each decode step's forward, so next_token_ids (phase
    # "target") is produced by both.
    prefill=(Phase("target", ("next_token_ids",), compute="target_prefill",
                   tokens_per_request="1", forwards="1"),),
    decode=(
        Phase("target", ("next_token_ids",), compute="target_verify",
              tokens_per_request="1", forwards="1"),
        Phase("commit"),
    ),
    decisions=(_NEXT_TOKEN,),
    sites=(Site("none_target", "target", ("next_token_ids",), presets=presets_for("rng"),
                doc="Generic sampler: all_reduce MIN only under SYNC_TOKEN_IDS_ACROSS_TP or "
                    "a grammar; unconverged by default."),),
    needs_taps=False, tree=False, drafter="none", round="plain", title="none",
    doc="No speculation: one sampled token per request per round.",
)
