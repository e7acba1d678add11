"""What SGLang picks for the speculative widths a launch line leaves out.

arg_groups/speculative_hook.py; the same in every supported release, checked against each
wheel by tests/engines/test_spec_defaults.py:
- EAGLE / EAGLE3 / NEXTN / STANDALONE with no --speculative-num-steps: all three widths come
  from _auto_choose_speculative_params by the target's architecture (hf_config.architectures[0]),
  and SGLang asserts that neither --speculative-eagle-topk nor --speculative-num-draft-tokens was
  given alone (_handle_eagle_family).
- NGRAM (_handle_ngram): topk is --speculative-ngram-max-bfs-breadth (default 10), the draft
  tokens default to 12, and num_steps = num_draft_tokens // topk.
"""

from __future__ import annotations

from specplan.engines.base import NoDefault

# (steps, topk, num_draft_tokens) by hf_config.architectures[0]; STANDALONE always (3, 1, 4)
SGLANG_BY_ARCH = {
    **dict.fromkeys(("LlamaForCausalLM",), (5, 4, 8)),
    **dict.fromkeys(("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM",
                     "GptOssForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM",
                     "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
                     "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM",
                     "PixtralForConditionalGeneration", "MiMoV2ForCausalLM",
                     "MiMoV2FlashForCausalLM"), (3, 1, 4)),
    **dict.fromkeys(("Grok1ForCausalLM", "Grok1VForCausalLM"), (5, 4, 8)),
}
SGLANG_OTHERWISE = (3, 1, 4)
SGLANG_STANDALONE = (3, 1, 4)
SGLANG_NGRAM_DRAFT_TOKENS = 12
SGLANG_NGRAM_BFS_BREADTH = 10


def sglang_eagle(algorithm: str, architecture: str | None, topk: int | None,
                 draft_tokens: int | None) -> tuple[tuple[int, int, int], str]:
    """((steps, topk, num_draft_tokens), why) SGLang picks when --speculative-num-steps is
    not given."""
    if topk is not None or draft_tokens is not None:
        given = "--speculative-eagle-topk" if topk is not None else "--speculative-num-draft-tokens"
        raise NoDefault(f"{given} without --speculative-num-steps: SGLang chooses the three "
                        "widths together or not at all (_handle_eagle_family asserts it)")
    if algorithm == "STANDALONE":
        return SGLANG_STANDALONE, "SGLang's default for STANDALONE (_auto_choose_speculative_params)"
    if architecture is None:
        raise NoDefault("--speculative-num-steps is missing and SGLang picks it by the target's "
                        "architecture, which needs the model config: pass --model-config "
                        "config.json (or a local model path)")
    widths = SGLANG_BY_ARCH.get(architecture, SGLANG_OTHERWISE)
    which = architecture if architecture in SGLANG_BY_ARCH else f"{architecture} (not in its table)"
    return widths, f"SGLang's default for {which} (_auto_choose_speculative_params)"


def sglang_ngram(breadth: int | None, draft_tokens: int | None) -> tuple[tuple[int, int, int], str]:
    topk = breadth or SGLANG_NGRAM_BFS_BREADTH
    width = draft_tokens or SGLANG_NGRAM_DRAFT_TOKENS
    return (width // topk, topk, width), (f"SGLang's NGRAM default: num_draft_tokens {width} // "
                                          f"max_bfs_breadth {topk} (_handle_ngram)")
