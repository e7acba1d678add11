"""vLLM's KV handoff rules, one strategy per connector (nixl, nixl_push, mooncake).

Read from the newest supported wheel:
- NixlConnector (pull): compute_tp_mapping (nixl/tp_mapping.py), one read per remote PP rank
  (_nixl_handshake walks range(remote_pp_size)); decode PP refused in base_worker.
- NixlPushConnector: the producer writes to handshake_target_ranks of the consumer TP; the
  consumer waits pp_size * max(1, producer TP // its world) notifications (push_worker).
- prefill context parallel (nixl, nixl_push; NixlBaseConnectorWorker.__init__ and
  _validate_remote_parallel_config in nixl/base_worker.py): replicated PCP (dcp 1) serves KV
  from PCP rank 0 only (the other PCP ranks report done at once, pull_worker / push_worker);
  PCP sharded by DCP makes the PCP ranks the transfer ranks (transfer_tp_size = pcp_size,
  transfer_tp_rank = pcp_rank) and the decode reads TransferTopology.dcp_source_ranks of them,
  each producer waiting for dcp_consumer_count readers. Refused: PCP + DCP not spanning the
  PCP group, replicated PCP against a DCP-sharded decode. Mooncake's bootstrap server keys
  workers by (dp, tp, pp) rank (MooncakeBootstrapServer.register_worker): a second PCP rank of
  the same TP rank is refused as "already registered".
- MooncakeConnector: receive_kv pulls handshake_target_ranks x (its own PP rank when the PP
  sizes match, else every producer stage); resolve_need_send counts consumers; layers are
  routed by name (allow_partial_layers), so a stage receives only the layers it holds.

Worked example, 8 ranks: nixl, prefill tp 2 x pp 2 (4 ranks) -> decode tp 4 (4):
    decode TP rank 3 reads prefill TP rank 3 * 2 // 4 = 1 on stages [0, 1]: 2 responses;
    each prefill rank's blocks have max(1, 4 // 2) = 2 consumers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from specplan.engines.handoff import Axes, Pull, Refusal, Rules, pp_sources
from specplan.engines.reads import Geometry
from specplan.engines.releases import newest, title
from specplan.engines.vllm import NAME

# The mesh coordinates vLLM's connectors call dp, attention-TP and CP.
AXES = Axes(dp="dp", tp="tp", cp="pcp", attn_tp="tp")
CONNECTORS = ("mooncake", "nixl", "nixl_push")  # as specplan plans them
DEFAULT_CONNECTOR = "nixl"
_VL = newest(NAME)  # the release whose code these rules read
_VL_TITLE = title(NAME)


@dataclass(frozen=True)
class _RefusedWidth:
    """A connector refuses one side's `width` above 1, saying f"{side} {spelled}={width}{why}"
    (`spelled`: the width as vLLM names it, else `width`)."""

    side: Literal["prefill", "decode"]
    width: Literal["pp", "cp", "dcp"]  # the Geometry attribute
    code: str
    why: str
    spelled: str = ""

    def __call__(self, p: Geometry, d: Geometry) -> list[Refusal]:
        width: int = getattr(p if self.side == "prefill" else d, self.width)
        if width <= 1:
            return []
        return [Refusal(self.code, f"{self.side} {self.spelled or self.width}={width}{self.why}")]


class _VllmRules:
    engine = NAME
    connector = ""
    by_name = False
    naming = "vLLM registers KV under layer names (model.layers.N) and a peer's KV is found by name"
    # the connector's own refusals after decode-cp, in order: each (prefill, decode) -> refusals
    refuses: tuple[Callable[[Geometry, Geometry], list[Refusal]], ...] = ()

    def refusals(self, p: Geometry, d: Geometry) -> list[Refusal]:
        out = []
        if d.cp > 1:
            out.append(Refusal("decode-cp", f"decode cp={d.cp}: vLLM's {self.connector} "
                               "connector supports prefill context parallel on the producer only"))
        for refuse in self.refuses:
            out += refuse(p, d)
        return out


def _pcp_sharded(p: Geometry) -> bool:
    """vLLM NixlBaseConnectorWorker.pcp_dcp_sharded: PCP whose KV DCP shards."""
    return p.cp > 1 and p.dcp > 1


def _pcp_refusals(p: Geometry, d: Geometry) -> list[Refusal]:
    """NixlBaseConnectorWorker._validate_remote_parallel_config, seen from the decode side."""
    if p.cp == 1:
        return []
    if p.dcp not in (1, p.cp):
        return [Refusal("pcp-refused", f"prefill pcp={p.cp} with dcp={p.dcp}: vLLM raises "
                        "\"Remote NixlConnector PCP+DCP does not span the full PCP group\" (dcp "
                        "must be 1 or the pcp size)")]
    if p.dcp == 1 and d.dcp > 1:
        return [Refusal("pcp-refused", f"prefill pcp={p.cp} with replicated KV (dcp 1) and "
                        f"decode dcp={d.dcp}: vLLM raises \"Replicated PCP cannot be paired with a "
                        "DCP-sharded NIXL peer\"")]
    if _pcp_sharded(p) and p.attn_tp > 1:
        return [Refusal("pcp-refused", f"prefill pcp={p.cp} sharded by dcp={p.dcp} with tp="
                        f"{p.attn_tp}: NixlConnector's transfer ranks are then the PCP ranks "
                        "(transfer_tp_rank = pcp_rank), so every TP rank of one PCP rank claims "
                        "the same transfer rank; " + _VL_TITLE + " maps only TP 1 (\"TP1 PCP+DCP owns "
                        "distinct KV shards\")")]
    return []


def _dcp_sources(remote: int, p: Geometry, d: Geometry, tp: int) -> tuple[tuple[int, ...], int]:
    """TransferTopology.dcp_source_ranks over `remote` transfer ranks sharded by the prefill's
    dcp, and dcp_consumer_count (vllm 0.33.0 kv_connector/utils.py)."""
    if d.dcp <= p.dcp:
        ranks = tuple(r for r in range(remote) if r % d.dcp == tp % d.dcp)
    else:
        ranks = ((tp % d.dcp) % p.dcp,)
    return ranks, d.attn_tp if d.dcp == 1 else max(1, d.dcp // p.dcp)


def _pcp_pull(p: Geometry, d: Geometry, tp: int) -> Pull:
    """Sharded PCP: the decode rank reads the PCP ranks TransferTopology.dcp_source_ranks
    names (remote tp = pcp); the producer waits for dcp_consumer_count readers."""
    cp_ranks, consumers = _dcp_sources(p.cp, p, d, tp)
    return Pull((0,), cp_ranks, tuple(range(p.pp)), len(cp_ranks) * p.pp, consumers)


def _replicated_pull(p: Geometry, d: Geometry) -> list[Refusal]:
    """NixlBaseConnectorWorker._validate_remote_agent_handshake (nixl/base_worker.py): without
    MLA, `assert not (tp_ratio < 0 and is_kv_replicated)`, a prefill TP wider than the decode's
    whose ranks outnumber the KV heads (so they hold copies) is refused."""
    if d.is_mla or p.attn_tp <= d.attn_tp or p.attn_tp <= p.num_kv_heads:
        return []
    return [Refusal("replicated-kv", f"prefill tp={p.attn_tp} > decode tp={d.attn_tp} with "
                    f"{p.num_kv_heads} KV heads replicated over the prefill ranks: vLLM asserts "
                    "`not (tp_ratio < 0 and is_kv_replicated)` (vllm 0.33.0 nixl/base_worker.py "
                    "NixlBaseConnectorWorker._validate_remote_agent_handshake)")]


def _dcp_divide(p: Geometry, d: Geometry) -> list[Refusal]:
    """NixlBaseConnectorWorker._validate_remote_agent_handshake (nixl/base_worker.py) asserts
    "DCP sizes must divide one another" of the two instances' decode context parallel sizes."""
    if p.dcp % d.dcp == 0 or d.dcp % p.dcp == 0:
        return []
    return [Refusal("dcp-refused", f"prefill dcp={p.dcp} -> decode dcp={d.dcp}: vLLM asserts "
                    f"\"DCP sizes must divide one another: local={d.dcp}, remote={p.dcp}\" "
                    f"({_VL_TITLE} nixl/base_worker.py NixlBaseConnectorWorker."
                    "_validate_remote_agent_handshake)")]


class VllmNixlPull(_VllmRules):
    connector = "nixl"
    function = f"{NAME} {_VL} compute_tp_mapping (kv_connector/v1/nixl/tp_mapping.py)"
    refuses = (
        _RefusedWidth("decode", "pp", "pull-pp", " with the pull connector nixl: its handshake "
                      "never exchanges pp_size (every handle resolves at prefill stage 0) and it "
                      "counts consumers over TP only, so the producer frees blocks after one "
                      "decode stage's notification while another stage still reads; "
                      f"{_VL_TITLE} refuses decode pipeline_parallel_size > 1"),
        _pcp_refusals, _replicated_pull, _dcp_divide)

    def pull(self, p: Geometry, d: Geometry, tp: int, stage: int) -> Pull:
        if _pcp_sharded(p):
            return _pcp_pull(p, d, tp)
        if d.is_mla and p.dcp > 1:  # compute_tp_mapping: the MLA DCP branch, over TP ranks
            tp_ranks, consumers = _dcp_sources(p.attn_tp, p, d, tp)
            return Pull(tp_ranks, (0,), tuple(range(p.pp)), len(tp_ranks) * p.pp, consumers)
        if d.is_mla or d.attn_tp >= p.attn_tp:
            tp_ranks = (tp * p.attn_tp // d.attn_tp,)
        else:
            tp_ranks = _unique_head_ranks(tp, d.attn_tp, p.attn_tp, p.num_kv_heads)
        consumers = max(1, d.attn_tp // p.attn_tp)
        return Pull(tp_ranks, (0,), tuple(range(p.pp)), len(tp_ranks) * p.pp, consumers)


def _unique_head_ranks(tp: int, tp_size: int, remote_tp: int, kv_heads: int) -> tuple[int, ...]:
    """Remote ranks read when remote TP > local TP: the first rank of each distinct KV head."""
    ratio = remote_tp // tp_size
    seen, out = set(), []
    for rank in range(tp * ratio, (tp + 1) * ratio):
        head = rank * kv_heads // remote_tp
        if head not in seen:
            seen.add(head)
            out.append(rank)
    return tuple(out)


class VllmNixlPush(_VllmRules):
    connector = "nixl_push"
    function = (f"{NAME} {_VL} NixlPushConnector (nixl/push_worker.py _xfer_blocks_for_req, "
                "consumer notification count)")
    refuses = (
        _RefusedWidth("decode", "pp", "pp-refused", f": {_VL_TITLE} raises \"NixlPushConnector "
                      "consumer (decode) does not support pipeline_parallel_size > 1\" "
                      "(completions counted per consumer rank)"),
        *(_RefusedWidth(side, "dcp", "dcp-refused", f": {_VL_TITLE} raises \"NixlPushConnector "
                        "does not support decode_context_parallel_size > 1.\" when either instance "
                        "builds it (nixl/connector.py NixlPushConnector.__init__)")
          for side in ("prefill", "decode")),
        _pcp_refusals)

    def pull(self, p: Geometry, d: Geometry, tp: int, stage: int) -> Pull:
        if _pcp_sharded(p):
            return _pcp_pull(p, d, tp)
        if p.attn_tp >= d.attn_tp:
            ratio = p.attn_tp // d.attn_tp
            writers = tuple(range(tp * ratio, (tp + 1) * ratio))
        else:
            writers = (tp // (d.attn_tp // p.attn_tp),)
        responses = p.pp * max(1, p.attn_tp // d.attn_tp)
        return Pull(writers, (0,), tuple(range(p.pp)), responses, max(1, d.attn_tp // p.attn_tp))


class VllmMooncake(_VllmRules):
    connector = "mooncake"
    by_name = True
    function = (f"{NAME} {_VL} MooncakeConnectorWorker.receive_kv / resolve_need_send and "
                "_compute_sender_transfer_plan (mooncake/mooncake_connector.py)")
    refuses = (
        _RefusedWidth("prefill", "cp", "pcp-refused", " with the mooncake connector: its "
                      "bootstrap server keys prefill workers by (dp, tp, pp) rank "
                      "(MooncakeBootstrapServer.register_worker), so the second PCP rank of a TP "
                      "rank is refused as \"already registered\"", spelled="pcp"),)

    def pull(self, p: Geometry, d: Geometry, tp: int, stage: int) -> Pull:
        tp_ranks: tuple[int, ...]
        if d.attn_tp >= p.attn_tp:
            tp_ranks = (tp // (d.attn_tp // p.attn_tp),)
        else:
            ratio = p.attn_tp // d.attn_tp
            tp_ranks = tuple(range(tp * ratio, (tp + 1) * ratio))
        pp_ranks, _ = pp_sources(p, d, stage)
        consumers = max(1, d.attn_tp // p.attn_tp) * (d.pp if d.pp > 1 and d.pp != p.pp else 1)
        return Pull(tp_ranks, (0,), pp_ranks, len(tp_ranks) * len(pp_ranks), consumers)


# connector -> its strategy
RULES: dict[str, Callable[[], Rules]] = {"nixl": VllmNixlPull, "nixl_push": VllmNixlPush,
                                         "mooncake": VllmMooncake}
