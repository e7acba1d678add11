"""What SGLang picks for the speculative widths a launch line leaves out.

arg_groups/speculative_hook.py, per release (`BY_RELEASE`: 0.5.20 - 0.5.23 choose alike, each
release's table checked against its own wheel by tests/engines/test_spec_defaults.py); import
applies the release the line is read as (the spec's engine_version) and names it:
- EAGLE / EAGLE3 / NEXTN / STANDALONE with no --speculative-num-steps: all three widths come
  from _auto_choose_speculative_params by the target's architecture (hf_config.architectures[0]),
  and SGLang asserts that neither --speculative-eagle-topk nor --speculative-num-draft-tokens was
  given alone (_handle_eagle_family).
- NGRAM (_handle_ngram): topk is --speculative-ngram-max-bfs-breadth (default 10), the draft
  tokens default to 12, and num_steps = num_draft_tokens // topk.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.engines.base import NoDefault
from specplan.engines.sglang import RELEASES
from specplan.engines.releases import newest, title

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


@dataclass(frozen=True)
class Defaults:
    """One release's choices: _auto_choose_speculative_params's table by architecture, its
    widths for any other architecture and for STANDALONE; _handle_ngram's two defaults."""

    by_arch: dict[str, tuple[int, int, int]]
    otherwise: tuple[int, int, int]
    standalone: tuple[int, int, int]
    ngram_draft_tokens: int
    ngram_bfs_breadth: int


_SAME = Defaults(SGLANG_BY_ARCH, SGLANG_OTHERWISE, SGLANG_STANDALONE, SGLANG_NGRAM_DRAFT_TOKENS,
                 SGLANG_NGRAM_BFS_BREADTH)
# Each supported release's choices; a release whose wheel chooses otherwise gets its own row.
BY_RELEASE: dict[str, Defaults] = dict.fromkeys(RELEASES, _SAME)


def of_release(version: str | None) -> tuple[Defaults, str]:
    """The release's defaults and its title ('SGLang 0.5.22'); None: the newest."""
    version = version or newest("sglang")
    return BY_RELEASE[version], title("sglang", version)


def sglang_eagle(algorithm: str, architecture: str | None, topk: int | None,
                 draft_tokens: int | None, version: str | None = None) -> tuple[tuple[int, int, int], str]:
    """((steps, topk, num_draft_tokens), why) SGLang `version` (None: the newest) picks when
    --speculative-num-steps is not given."""
    d, name = of_release(version)
    if topk is not None or draft_tokens is not None:
        given = "--speculative-eagle-topk" if topk is not None else "--speculative-num-draft-tokens"
        raise NoDefault(f"{given} without --speculative-num-steps: SGLang chooses the three "
                        "widths together or not at all (_handle_eagle_family asserts it)")
    if algorithm == "STANDALONE":
        return d.standalone, f"{name}'s default for STANDALONE (_auto_choose_speculative_params)"
    if architecture is None:
        raise NoDefault("--speculative-num-steps is missing and SGLang picks it by the target's "
                        "architecture, which needs the model config: pass --model-config "
                        "config.json (or a local model path)")
    widths = d.by_arch.get(architecture, d.otherwise)
    which = architecture if architecture in d.by_arch else f"{architecture} (not in its table)"
    return widths, f"{name}'s default for {which} (_auto_choose_speculative_params)"


def sglang_ngram(breadth: int | None, draft_tokens: int | None,
                 version: str | None = None) -> tuple[tuple[int, int, int], str]:
    d, name = of_release(version)
    topk = breadth or d.ngram_bfs_breadth
    width = draft_tokens or d.ngram_draft_tokens
    return (width // topk, topk, width), (f"{name}'s NGRAM default: num_draft_tokens {width} // "
                                          f"max_bfs_breadth {topk} (_handle_ngram)")
