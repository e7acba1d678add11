"""SGLang's row for each speculative method (engines/method_row.py): its
--speculative-algorithm, PP / DP-attention / CP support, how it converges the method's decisions.

Names: fields/spec.py lists the builtins (EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM, DFLASH, DSPARK,
UNO; NEXTN aliases EAGLE). PP: arg_groups/validation_hook.py check_pipeline_parallel_compat.
Convergence: reference/decisions.md §0.1 (SpecTpSync sites), §1 (eagle_sample), §0.4.
"""

from __future__ import annotations

from typing import TypedDict

from specplan.engines.method_row import Group, MethodRow, MethodRows, Sync

# eagle_sample's broadcasts (the EAGLE family and NGRAM share the accept kernel).
EAGLE_GREEDY = "unconverged on cuda/npu/cpu/xpu; broadcast on hip"
EAGLE_SAMPLING = "broadcast predict, accept_index, num_correct_drafts"


class Accept(TypedDict):
    """The row fields of the methods eagle_sample converges (`MethodRow(..., **ACCEPT)`)."""

    sync: Sync
    group: Group
    accept_greedy: str


class EagleFamily(Accept):
    accept_sampling: str
    worker: str


ACCEPT: Accept = {"sync": "accept_broadcast", "group": "attn_tp_or_tp", "accept_greedy": EAGLE_GREEDY}
EAGLE_FAMILY: EagleFamily = {**ACCEPT, "accept_sampling": EAGLE_SAMPLING, "worker": "eagle_worker"}


def _accept(method: str) -> frozenset[str]:
    return frozenset({f"{method}_accept"})


ROWS = MethodRows((
    MethodRow("none", None, pp="yes", group="attn_tp_or_tp"),
    MethodRow("eagle", "EAGLE", pp="gated", default_sites=_accept("eagle"), **EAGLE_FAMILY,
              pp_note="gated relay under SGLANG_ENABLE_PP_SPEC=1 (no PD, no adaptive, no "
                      "DP-attention); otherwise PD prefill nodes only, relaying the proposal"),
    MethodRow("eagle3", "EAGLE3", default_sites=_accept("eagle3"), **EAGLE_FAMILY),
    # decisions.md §1/§7: NEXTN resolves to EAGLE, which is what the PP gate checks.
    MethodRow("mtp", "NEXTN", pp="gated", default_sites=_accept("mtp"), **EAGLE_FAMILY,
              pp_note="single-layer NextN only (resolves to EAGLE); multi-layer and frozen-KV "
                      "MTP are excluded from PP"),
    MethodRow("standalone", "STANDALONE", default_sites=_accept("standalone"), **EAGLE_FAMILY),
    MethodRow("ngram", "NGRAM", default_sites=_accept("ngram"), worker="ngram_worker", **ACCEPT),
    # DFlash's SpecTpSync is built on get_dp_tp_group() (dflash_worker_v2.py
    # DFlashWorkerV2.__init__); its greedy draft head all-gathers (max, id) over tp and takes
    # the first max, under every preset (§0.4).
    MethodRow("dflash", "DFLASH", sync="spec_tp_sync", group="attn_tp_or_tp",
              worker="dflash_worker", dp_lm_head="not_on_npu", error_name="DFLASH",
              default_sites=frozenset({"dflash_target", "dflash_draft", "dflash_accept_greedy",
                                       "dflash_accept_sample", "dflash_mem"}),
              always_sites=frozenset({"dflash_draft"}),
              cp_note="DP-attention forbids attn-CP (decisions.md §3)",
              variants_note="dflash_selector: DFLASH_SELECTOR (13) carries accept_len, bonus "
                            "for selector/LiLiCorr sampled accept; presets all, rng"),
    # The drafter lives on the last PP stage; PP only on PD prefill nodes.
    MethodRow("dspark", "DSPARK", pp="prefill_only", dp_attention="attn_tp_one_with_moe",
              dp_lm_head="always", error_name="DSpark",
              sync="spec_tp_sync", group="attn_tp_or_tp", worker="dspark_worker",
              default_sites=frozenset({"dspark_target", "dspark_draft", "dspark_plan",
                                       "dspark_accept_greedy", "dspark_accept_sample",
                                       "dspark_mem"}),
              variants_note="dspark_accept_graph: DSPARK_ACCEPT_GRAPH (10) carries the same "
                            "three from the in-graph greedy epilogue; all only",
              mem_group="draft tp group (full tp for a MoE draft under DP-attention)"),
))
