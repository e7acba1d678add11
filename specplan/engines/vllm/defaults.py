"""What vLLM picks for the speculative widths a launch line leaves out.

config/speculative.py SpeculativeConfig.__post_init__: only MTP defaults
num_speculative_tokens, to the checkpoint's num_nextn_predict_layers (n_predict); every other
method refuses a config without it.
"""

from __future__ import annotations

from specplan.engines.base import NoDefault


def vllm_tokens(method: str, config: dict | None) -> tuple[int, str]:
    if method == "mtp" and config is not None:
        layers = (config.get("text_config") or config).get("num_nextn_predict_layers")
        if layers:
            return int(layers), "vLLM's default for MTP: the checkpoint's num_nextn_predict_layers"
    if method == "mtp":
        raise NoDefault("--speculative-config has no num_speculative_tokens and vLLM takes MTP's "
                        "from the checkpoint's num_nextn_predict_layers: pass --model-config "
                        "config.json (or a local model path)")
    raise NoDefault(f"--speculative-config has no num_speculative_tokens, which vLLM requires "
                    f"for method {method!r} (SpeculativeConfig: only MTP defaults it)")
