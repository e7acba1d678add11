"""The sim's correctness matrix: topologies x methods, as spec YAML text.

Used by tests/sim and benchmarks/bench_sim.py; `spec_text` writes a small spec (SGLang, or
vLLM where SGLang refuses it) whose sim must be token-identical to plain greedy decoding.
"""

from __future__ import annotations

from specplan.methods import METHODS as CATALOGUE

TOPOLOGIES = {
    "tp2": "{tp: 2}",
    "pp2": "{tp: 1, pp: 2}",
    "pp3": "{tp: 1, pp: 3}",
    "tp2pp2": "{tp: 2, pp: 2}",
    "tp4-dpattn2": "{tp: 4, dp: 2, dp_attention: true}",
    "tp2-dpattn2": "{tp: 2, dp: 2, dp_attention: true}",
}

# EAGLE as a chain and as a tree, then every other method that drafts from a head or a lookup
# (standalone's separate draft model is left out), in the catalogue's order.
SHAPED = {
    "eagle-chain": "{method: eagle, num_steps: 3}",
    "eagle-tree": "{method: eagle, num_steps: 3, topk: 2, num_draft_tokens: 6}",
}
METHODS = {**SHAPED, **{name: f"{{method: {name}, num_steps: 3}}" for name, m in CATALOGUE.items()
                        if m.speculates and m.drafter != "model" and f"{name}-chain" not in SHAPED}}


def spec_text(topology: str, method: str, *, sampling: str = "greedy", policy: str = "safe",
              layers: int = 6, moe: bool = False, extra: str = "", engine: str | None = None) -> str:
    """A small spec; `engine` None: SGLang, or vLLM where SGLang would refuse to launch the
    combination and vLLM starts it (EAGLE3, n-gram, DFlash, DSpark under pipeline parallel)."""
    name = f"sim-{topology}-{method}".replace("_", "-")
    spec = METHODS[method][:-1] + (f", sampling: {sampling}}}" if sampling != "greedy" else "}")
    moe_text = ", moe: {num_experts: 8, top_k: 2}" if moe else ""
    topo = TOPOLOGIES[topology]
    if moe and "dp_attention" in topo:
        topo = topo[:-1] + f", ep: {topo.split('tp: ')[1].split(',')[0]}}}"

    def text(engine: str) -> str:
        return (f"name: {name}\nengine: {engine}\ntopology: {topo}\n"
                f"model: {{num_layers: {layers}, hidden_size: 64, vocab_size: 512{moe_text}}}\n"
                f"speculative: {spec}\nsync: {{policy: {policy}}}\n{extra}")

    if engine is None:
        engine = "vllm" if not _launches(text("sglang")) and _launches(text("vllm")) else "sglang"
    return text(engine)


def _launches(text: str) -> bool:
    from specplan.engines import of
    from specplan.errors import SpecError
    from specplan.schema.load import load_spec_text

    try:
        spec = load_spec_text(text, "matrix.yaml")
    except SpecError:
        return False
    return of(spec).launch_refusal(spec) is None
