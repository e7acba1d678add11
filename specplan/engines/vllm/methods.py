"""vLLM's row for each speculative method (engines/method_row.py): its speculative_config.method,
PP support, and what differs from specplan's record.

Names: vllm/config/speculative.py SpeculativeMethod ("mtp" is one of MTPModelTypes, "draft_model"
the standalone drafter). Model Runner V2 converges nothing inside TP (identical logits and
counter-based RNG), verifies chains only, and runs every method under PP.

Which method a --speculative-config means when it names none, and the num_speculative_tokens
vLLM picks when it leaves it out (`vllm_method`, `vllm_tokens`): config/speculative.py
SpeculativeConfig.__post_init__; only MTP defaults num_speculative_tokens, to the checkpoint's
num_nextn_predict_layers (n_predict); every other method refuses a config without it.
"""

from __future__ import annotations

from specplan.engines.base import NoDefault
from collections.abc import Mapping
from typing import Any, TypedDict

from specplan.engines.method_row import PP, DpAttention, MethodRow, MethodRows



class ModelRunnerV2(TypedDict):
    """The row fields every method shares under Model Runner V2 (`MethodRow(..., **V2)`)."""

    pp: PP
    dp_attention: DpAttention


V2: ModelRunnerV2 = {"pp": "yes", "dp_attention": "not_an_option"}
# A checkpoint's config.json as json.load returns it: its values are any JSON value, read by key.
Config = Mapping[str, Any]

ROWS = MethodRows((
    MethodRow("none", None, **V2, note="no broadcast within TP: identical logits and seeds"),
    # EAGLE-1 drafters (llama_eagle.py EagleLlamaForCausalLM, deepseek_eagle.py) start their
    # layer ids at ModelConfig.get_num_layers(parallel_config): the last stage's own count.
    MethodRow("eagle", "eagle", **V2, draft_layer_ids="stage_local", layer_ids_after_target=True,
              detected_from="eagle-",
              note="chain only: vLLM has no tree verify (tree attention removed)"),
    # llama_eagle3.py: the draft's config names the target layers it reads.
    MethodRow("eagle3", "eagle3", **V2, taps_from_draft_config=True, layer_ids_after_target=True,
              detected_from="eagle3",
              note="chain only; PP with chained tap relay in Model Runner V2"),
    MethodRow("mtp", "mtp", **V2, name_suffix="_mtp", note="chain only"),
    MethodRow("standalone", "draft_model", **V2, note="chain only"),
    MethodRow("ngram", "ngram", **V2, variant="chain",
              note="chain only; rejection sampler without draft probs"),
    MethodRow("dflash", "dflash", **V2, detected_from="dflash",
              note="chain only; taps relayed along PP in Model Runner V2"),
    MethodRow("dspark", "dspark", **V2, detected_from="dspark",
              pp_note="PP support open (vllm#56956)", note="chain only; PP support open (vllm#56956)"),
))



def vllm_tokens(method: str, config: Config | None) -> tuple[int, str]:
    if method == "mtp" and config is not None:
        layers = (config.get("text_config") or config).get("num_nextn_predict_layers")
        if layers:
            return int(layers), ("vLLM's default for MTP: the checkpoint's num_nextn_predict_layers "
                                 "(SpeculativeConfig.__post_init__, as n_predict)")
    if method == "mtp":
        raise NoDefault("--speculative-config has no num_speculative_tokens and vLLM takes MTP's "
                        "from the checkpoint's num_nextn_predict_layers: pass --model-config "
                        "config.json (or a local model path)")
    raise NoDefault(f"--speculative-config has no num_speculative_tokens, which vLLM requires "
                    f"for method {method!r} (SpeculativeConfig: only MTP defaults it)")


# vLLM 0.33.0 config/speculative.py: MTPModelTypes, and the draft model types
# SpeculativeConfig.hf_config_override rewrites unconditionally to one of them (deepseek_v3 /
# deepseek_v32 / glm_moe_dsa -> deepseek_mtp, dots3_note, pangu_ultra_moe, kimi_k3,
# ernie4_5_moe, qwen3_next, longcat_flash, exaone_moe -> <type>_mtp).
MTP_MODEL_TYPES = frozenset({
    "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
    "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp",
    "exaone4_5_mtp", "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp",
    "bailing_hybrid_v3_mtp", "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp",
    "pangu_ultra_moe_mtp", "step3p5_mtp", "step5_mtp", "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp",
    "inkling_mtp", "glm5_next_mtp"})
MTP_REWRITTEN = frozenset({"deepseek_v3", "deepseek_v32", "glm_moe_dsa", "dots3_note",
                           "pangu_ultra_moe", "kimi_k3", "ernie4_5_moe", "qwen3_next",
                           "longcat_flash", "exaone_moe"})
DFLASH_ARCHS = frozenset({"MuseGlimmerAssistantModel"})
DSPARK_ARCHS = frozenset({"Qwen3DSparkModel", "Gemma4DSparkModel"})
_WHERE = "vLLM 0.33.0 SpeculativeConfig.__post_init__"


def vllm_method(model: object, draft: Config | None) -> tuple[str, str]:
    """(vLLM's method name, why) for a --speculative-config without `method`, as vLLM fills it
    in: `model` "ngram" -> ngram; otherwise draft_model, which the draft's name and config then
    refine: "eagle-" -> eagle, "eagle3" -> eagle3, "dflash" (or a DFlash architecture) ->
    dflash, "dspark" (or a DSpark architecture) -> dspark, an MTP model_type -> mtp; else it
    stays draft_model. NoDefault where the draft's config decides and is not at hand."""
    if model is None:
        raise NoDefault("--speculative-config has neither method nor model: vLLM takes it as "
                        "draft_model without a draft and refuses it (num_speculative_tokens "
                        f"was provided but without speculative model; {_WHERE})")
    if model in ("ngram", "[ngram]"):
        return "ngram", f"model {model!r} is n-gram ({_WHERE})"
    name = str(model).lower()
    for needle, method in ((r.detected_from, r.name) for r in ROWS.rows.values()
                           if r.detected_from and r.name is not None):
        if needle in name:
            return method, f"the draft's name holds {needle!r} ({_WHERE}: detected method)"
    if draft is None:
        raise NoDefault(f"--speculative-config has no method and vLLM detects it from the "
                        f"draft's config.json ({model}: its model_type and architectures; "
                        f"{_WHERE}): pass --draft-config config.json, or name the method")
    text = draft.get("text_config", draft) if isinstance(draft.get("text_config"), dict) else draft
    archs = set(draft.get("architectures") or [])
    if archs & DFLASH_ARCHS:
        return "dflash", f"the draft's architecture {sorted(archs & DFLASH_ARCHS)[0]} ({_WHERE})"
    dspark = archs & DSPARK_ARCHS or ("DSparkDraftModel" in archs and text.get("model_type") == "qwen3")
    if dspark:
        return "dspark", f"the draft's architectures {sorted(archs)} ({_WHERE})"
    kind = draft.get("model_type")
    if kind in MTP_MODEL_TYPES or kind in MTP_REWRITTEN:
        return "mtp", (f"the draft's model_type {kind!r} is an MTP model (MTPModelTypes, after "
                       f"SpeculativeConfig.hf_config_override; {_WHERE})")
    return "draft_model", (f"the draft's name and config ({kind or 'no model_type'}) name no "
                           f"other method, so vLLM runs it as draft_model ({_WHERE})")


# The older releases whose own code, given num_speculative_tokens and no draft model, took the
# target itself as the draft (its MTP layers: SpeculativeConfig.hf_config_override turns
# deepseek_v3 into deepseek_mtp) when the target's hf_text_config.model_type was one of these;
# read from each release's wheel (vllm/config.py, 0.10.2: vllm/config/__init__.py). 0.6.6 refused
# every such config; from 0.15.0 on, as in the supported releases, only `method: mtp` (or
# ngram/suffix) does it, else "num_speculative_tokens was provided but without speculative model".
# tests/engines/test_older_mtp_wheels.py (-m versions) reads each wheel's SpeculativeConfig to check this.
OLDER_MTP: dict[str, tuple[str, frozenset[str]]] = {
    "0.7.3": ("SpeculativeConfig.maybe_create_spec_config", frozenset({"deepseek_v3"})),
    "0.8.5": ("SpeculativeConfig.__post_init__", frozenset({"deepseek_v3"})),
    "0.9.2": ("SpeculativeConfig.__post_init__", frozenset({"deepseek_v3", "mimo"})),
    "0.10.2": ("SpeculativeConfig.__post_init__",
               frozenset({"deepseek_v3", "mimo", "ernie4_5_moe", "qwen3_next"})),
}


def older_mtp(release: str | None, target: Config | None) -> tuple[str, str] | None:
    """(vLLM's method name, why) where a --speculative-config with neither method nor model
    means MTP on a line written for the older vLLM `release` (None: it did not, or the target's
    config is not at hand)."""
    if release not in OLDER_MTP or target is None:
        return None
    text = target.get("text_config")
    kind = (text if isinstance(text, dict) else target).get("model_type")
    where, kinds = OLDER_MTP[release]
    if kind not in kinds:
        return None
    return "mtp", (f"the line names no method and no draft model, and vLLM {release}'s {where} "
                   f"took the target itself (model_type {kind!r}) as its MTP draft; the "
                   "supported releases need `method: mtp` spelt out")
