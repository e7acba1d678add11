"""Tiny models for the vLLM-on-CPU example (run.sh) and the real-engine lane, built locally
(no weights are downloaded).

Run by the vLLM environment's Python (tools/vllm_cpu_env.sh: it has torch and safetensors):
    python examples/vllm-cpu/tiny_models.py OUT_DIR
writes OUT_DIR/target (a 4-layer Llama), OUT_DIR/draft (the target's weights plus small noise,
so that most drafts are accepted) and OUT_DIR/eagle3 (a one-layer EAGLE3 head in the layout
vLLM's llama_eagle3.py loads: midlayer.*, fc, norm, lm_head). Weights are random but seeded, so
every run builds the same models. No tokenizer: the example and the tests pass token ids and
start vLLM with skip_tokenizer_init.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

LAYERS, HIDDEN, HEADS, KV_HEADS, VOCAB, FFN = 4, 256, 4, 2, 1024, 512
HEAD_DIM = HIDDEN // HEADS
EAGLE_AUX = [1, 2, 3]  # tap ids the EAGLE3 head reads (vLLM's default for 4 layers is [2, 2, 1])


def llama_config(layers: int = LAYERS, **extra) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
            "intermediate_size": FFN, "num_hidden_layers": layers, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB,
            "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32",
            "bos_token_id": 1, "eos_token_id": 2, **extra}


def _layer(gen: torch.Generator, prefix: str, qkv_in: int = HIDDEN) -> dict:
    def w(rows, cols, std):
        return torch.randn(rows, cols, generator=gen) * std

    return {f"{prefix}.self_attn.q_proj.weight": w(HEADS * HEAD_DIM, qkv_in, 0.08),
            f"{prefix}.self_attn.k_proj.weight": w(KV_HEADS * HEAD_DIM, qkv_in, 0.08),
            f"{prefix}.self_attn.v_proj.weight": w(KV_HEADS * HEAD_DIM, qkv_in, 0.08),
            f"{prefix}.self_attn.o_proj.weight": w(HIDDEN, HEADS * HEAD_DIM, 0.05),
            f"{prefix}.mlp.gate_proj.weight": w(FFN, HIDDEN, 0.06),
            f"{prefix}.mlp.up_proj.weight": w(FFN, HIDDEN, 0.06),
            f"{prefix}.mlp.down_proj.weight": w(HIDDEN, FFN, 0.05),
            f"{prefix}.input_layernorm.weight": torch.ones(HIDDEN),
            f"{prefix}.post_attention_layernorm.weight": torch.ones(HIDDEN)}


def target_weights(seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    weights = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN, generator=gen),
               "model.norm.weight": torch.ones(HIDDEN),
               # A wide lm_head makes the greedy choice clear, so a noisy draft agrees with it.
               "lm_head.weight": torch.randn(VOCAB, HIDDEN, generator=gen) * 0.5}
    for i in range(LAYERS):
        weights.update(_layer(gen, f"model.layers.{i}"))
    return weights


def eagle3_weights(seed: int = 1) -> dict:
    gen = torch.Generator().manual_seed(seed)
    weights = _layer(gen, "midlayer", qkv_in=2 * HIDDEN)
    weights["midlayer.hidden_norm.weight"] = torch.ones(HIDDEN)
    weights["fc.weight"] = torch.randn(HIDDEN, HIDDEN * len(EAGLE_AUX), generator=gen) * 0.03
    weights["norm.weight"] = torch.ones(HIDDEN)
    weights["lm_head.weight"] = torch.randn(VOCAB, HIDDEN, generator=gen) * 0.5
    return weights


def _save(path: Path, weights: dict, config: dict) -> None:
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    (path / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}) + "\n")


def build(out: Path) -> None:
    target = target_weights()
    _save(out / "target", target, llama_config())
    gen = torch.Generator().manual_seed(2)
    draft = {k: v + torch.randn(v.shape, generator=gen) * 0.002 * v.std().clamp(min=1e-3)
             for k, v in target.items()}
    _save(out / "draft", draft, llama_config())
    eagle = llama_config(layers=1, architectures=["LlamaForCausalLMEagle3"],
                         eagle_config={"eagle_aux_hidden_state_layer_ids": EAGLE_AUX},
                         eagle_aux_hidden_state_layer_ids=EAGLE_AUX,
                         target_hidden_size=HIDDEN, draft_vocab_size=VOCAB)
    _save(out / "eagle3", eagle3_weights(), eagle)


if __name__ == "__main__":
    build(Path(sys.argv[1]))
