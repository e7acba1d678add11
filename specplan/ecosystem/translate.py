"""Whether an engine can run a spec, and how a spec of one engine reads on the other.

`refusal(spec)` names why the spec's own engine cannot run it (the engine convention's
launch_refusal, specplan/engines/). `translate(spec, engine)` rewrites the layout for the
other engine with the same ranks, and says where the two layouts differ.

Worked example, 16 ranks: SGLang tp=16, dp=8 with DP-attention, ep=16 is one TP block read as
attn_dp 8 x attn_tp 2 with experts over all 16 ranks; vLLM has no DP-attention, so it becomes
dp=8 replicas of tp=2 with --enable-expert-parallel (experts over dp * tp = 16 ranks).
"""

from __future__ import annotations

from collections.abc import Callable

from specplan.ecosystem.yaml_out import reload, spec_data
from specplan.engines import convention
from specplan.engines.base import PerEngine
from specplan.engines.sglang.convention import SGLang
from specplan.engines.vllm.convention import VLLM
from specplan.errors import UserError
from specplan.schema import Spec

# the engine a spec is translated to -> its layout rewritten from the other engine's
REWRITES: PerEngine[Callable[[Spec], tuple[dict, list[str]]]] = PerEngine("layout rewrite")


class Refusal(Exception):
    """The engine cannot run the spec; the message names the reason."""


def refusal(spec: Spec) -> str | None:
    """Why spec.engine cannot run `spec`, or None when it can."""
    return convention(spec.engine, spec.engine_version).launch_refusal(spec)


def translate(spec: Spec, engine: str) -> tuple[Spec, list[str]]:
    """`spec` rewritten for `engine` on the same ranks, and notes on where layouts differ.

    Refusal when the other engine has no spelling for the layout."""
    target = convention(engine)
    if target is convention(spec.engine):  # the spec's own engine
        return spec, []
    data = spec_data(spec)
    topo, notes = REWRITES[target](spec)
    # Sizes of 1 and a false dp_attention are the defaults: leave them unwritten.
    topo = {k: v for k, v in topo.items() if k == "tp" or v is True or type(v) is int and v > 1}
    data["topology"] = {k: v for k, v in {**data["topology"], **topo}.items()
                        if k in topo or k in ("device", "backend", "nodes")}
    data.pop("engine_args", None)  # the other engine's line: its own spelling
    data.pop("engine_version", None)  # a release of the other engine: export names one
    data["engine"] = engine
    notes += _partition(spec, engine, data)
    try:
        return reload(data, f"{spec.line_of()[0]} (as {target.title})"), notes
    except UserError as exc:
        why = "; ".join(d.message for d in exc.diagnostics)
        raise Refusal(f"the {spec.engine} layout has no {target.title} equivalent: {why}") from None


@REWRITES.of(VLLM)
def _to_vllm(spec: Spec) -> tuple[dict, list[str]]:
    t = spec.topology
    if t.moe_dp > 1:
        raise Refusal(f"vLLM has no MoE data parallel (topology.moe_dp={t.moe_dp})")
    dp = t.dp
    tp = t.tp // (t.dp if t.dp_attention else 1) // t.cp
    notes = []
    if t.dp_attention:
        notes.append(f"layout: SGLang's DP-attention (attn_dp {t.dp} x attn_tp {tp} inside one "
                     f"TP block of {t.tp}) has no vLLM equivalent: vLLM runs dp={dp} replicas, "
                     f"each with its own tp={tp}")
    if t.cp > 1:
        notes.append(f"layout: SGLang's attention CP splits the TP block; vLLM's prefill CP "
                     f"multiplies the world: tp={tp}, pcp={t.cp} keep the rank count")
    world = dp * t.cp * tp
    ep = 1
    if t.ep > 1:
        if t.ep != t.tp:
            raise Refusal(f"vLLM expert parallel is all or nothing (ep = dp * pcp * tp = {world}); "
                          f"SGLang's ep={t.ep} inside tp={t.tp} has no vLLM equivalent")
        ep = world
        if not t.dp_attention and dp > 1:
            notes.append(f"layout: vLLM's expert parallel spans all {dp} dp replicas ({world} "
                         f"ranks); SGLang's --dp-size worlds each hold their own experts")
    elif t.dp_attention and spec.model.moe:
        notes.append("layout: SGLang keeps MoE tensor parallel over the whole TP block; "
                     f"vLLM without expert parallel shards MoE only within each tp={tp}")
    return {"tp": tp, "pp": t.pp, "dp": dp, "cp": t.cp, "dcp": t.dcp, "ep": ep}, notes


@REWRITES.of(SGLang)
def _to_sglang(spec: Spec) -> tuple[dict, list[str]]:
    t = spec.topology
    block = t.cp * t.tp
    notes = []
    if t.cp > 1:
        notes.append(f"layout: vLLM's prefill CP multiplies the world; SGLang's attention CP "
                     f"lives inside the TP block: tp = pcp {t.cp} x tp {t.tp} = {block}")
    if t.ep > 1 and t.dp > 1:
        notes.append(f"layout: vLLM's dp={t.dp} replicas share experts (expert parallel over "
                     f"{t.ep} ranks); SGLang spells this as DP-attention: one TP block of "
                     f"{t.dp * block} read as attn_dp {t.dp} x attn_tp {t.tp}")
        return {"tp": t.dp * block, "pp": t.pp, "dp": t.dp, "dp_attention": True, "cp": t.cp,
                "dcp": t.dcp, "ep": t.dp * block}, notes
    return {"tp": block, "pp": t.pp, "dp": t.dp, "cp": t.cp, "dcp": t.dcp,
            "ep": block if t.ep > 1 else 1}, notes



def _partition(spec: Spec, engine: str, data: dict) -> list[str]:
    """Keep the source engine's layer split: the two engines place remainder layers apart."""
    m, pp = spec.model, spec.topology.pp
    if pp == 1 or m.pp_partition:
        return []
    source, target = convention(spec.engine, spec.engine_version), convention(engine)
    mine, theirs = source.split_layers(m.num_layers, pp), target.split_layers(m.num_layers, pp)
    if mine == theirs:
        return []
    data["model"]["pp_partition"] = mine
    where = source.remainder_stages
    return [f"layout: {spec.engine} gives remainder layers to the {where} ({mine}), "
            f"{engine} would split {theirs}; the layer partition variable keeps {mine}"]
