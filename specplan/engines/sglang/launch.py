"""SGLang's launch line as data: what import reads and export writes (engines/launch.py).

Read from the newest supported wheel. ServerArgs fields are declared in
sglang/srt/arg_groups/fields/*.py; `add_cli_args_from_dataclass` (sglang/srt/arg_groups/
arg_utils.py) turns field `a_b` into `--a-b` plus its aliases. `--enable-dp-attention` is a
deprecated flag registered in sglang/srt/server_args.py (`--dp-size N --enable-dp-attention`
resolves to `--attn-dp-size N`, parallel_hook.py). Environment: sglang/srt/environ.py
(SGLANG_SPEC_TP_SYNC, SGLANG_ENABLE_PP_SPEC) and sglang/srt/distributed/utils.py get_pp_indices
(SGLANG_PP_LAYER_PARTITION, os.getenv). Disaggregation: `--disaggregation-mode prefill|decode`
and `--disaggregation-transfer-backend` (sglang/srt/arg_groups/fields/disagg.py, default
mooncake).
"""

from __future__ import annotations

from collections.abc import Mapping

from specplan.engines.launch import LaunchProblem, LaunchTable
from specplan.engines.sglang.handoff import CONNECTORS, DEFAULT_CONNECTOR

# Which of SGLang's arguments specplan plans: argparse dest -> the spec key it lands in.
SGLANG_MODELLED: dict[str, str] = {
    "model_path": "model.path", "tp_size": "topology.tp", "pp_size": "topology.pp",
    "dp_size": "topology.dp", "attn_dp_size": "topology.dp",
    "enable_dp_attention": "topology.dp_attention", "attn_cp_size": "topology.cp",
    "dcp_size": "topology.dcp", "ep_size": "topology.ep", "moe_dp_size": "topology.moe_dp",
    "nnodes": "topology.nodes", "device": "topology.device",
    "enable_dp_lm_head": "topology.dp_lm_head", "dtype": "model.dtype",
    "quantization": "model.dtype", "kv_cache_dtype": "model.kv_cache_dtype",
    "moe_a2a_backend": "model.moe.a2a", "enable_eplb": "model.moe.eplb",
    "speculative_algorithm": "speculative.method", "speculative_num_steps": "speculative.num_steps",
    "speculative_eagle_topk": "speculative.topk",
    "speculative_ngram_max_bfs_breadth": "speculative.topk",  # NGRAM's (_handle_ngram)
    "speculative_num_draft_tokens": "speculative.num_draft_tokens",
    "speculative_dspark_block_size": "speculative.num_steps",
    "speculative_dflash_block_size": "speculative.num_steps",
    "speculative_draft_model_path": "speculative.draft_path",
    "disable_overlap_schedule": "runtime.async_scheduling",
    "cuda_graph_max_bs_decode": "runtime.max_batch",
    "page_size": "model.page_size",
    "disaggregation_mode": "disaggregation.role",
    "disaggregation_transfer_backend": "disaggregation.connector",
    "config": "(its options are read as if on the line)",
}
ENV = ("SGLANG_SPEC_TP_SYNC", "SGLANG_ENABLE_PP_SPEC", "SGLANG_PP_LAYER_PARTITION",
       "SGLANG_ZBAL_LOCAL_MEM_SIZE")
# --moe-a2a-backend values that set ep_size = tp_size (arg_groups/overrides.py _a2a_ep_size,
# _A2A_EP_SPANNING_BACKENDS).
EP_SPANNING_A2A = frozenset({"megamoe", "deepep", "deepep_v2", "mooncake", "nixl",
                             "ascend_fuseep", "flashinfer", "flashinfer_megamoe", "mori", "pplx"})


class SGLangFlags:
    mode, backend = "--disaggregation-mode", "--disaggregation-transfer-backend"

    def write(self, role: str, connector: str) -> list[tuple[str, str, str]]:
        return [(self.mode, role, "this instance's role (disaggregation.role)"),
                (self.backend, connector, "KV transfer (disaggregation.connector)")]

    def read(self, flags: Mapping[str, object]) -> dict[str, str] | None:
        role = flags.get(self.mode)
        if role in (None, "null"):
            if self.backend in flags:
                raise LaunchProblem(f"{self.backend} without {self.mode} prefill|decode")
            return None
        if role not in ("prefill", "decode"):
            raise LaunchProblem(f"{self.mode} {role}: expected prefill or decode")
        connector = flags.get(self.backend) or DEFAULT_CONNECTOR
        if connector not in CONNECTORS:
            raise LaunchProblem(f"{self.backend} {connector}: specplan plans {' | '.join(CONNECTORS)}")
        return {"role": role, "connector": connector}

    def implied_device(self, read: Mapping[str, str] | None) -> tuple[str, str] | None:
        if read is None or read.get("connector") != "ascend":
            return None
        return "npu", ("the ascend transfer backend runs on Ascend NPUs only (disaggregation/"
                       "ascend/conn.py AscendKVManager over AscendTransferEngine), and SGLang "
                       "finds the NPU when the line names no --device")


class SGLangNodes:
    """SGLang across nodes: every node runs the same line with `--nnodes N --node-rank R
    --dist-init-addr HEAD:PORT` (sglang/srt/arg_groups/fields/parallel.py; the address is
    `host:port`, NetworkAddress.parse in sglang/srt/server_args.py refuses it without the
    port). specplan writes no Ray lines for SGLang (its `--use-ray` is not planned)."""

    executors: tuple[str, ...] = ("mp",)
    per_node = frozenset({"node_rank"})
    dests = frozenset({"node_rank", "dist_init_addr"})
    ray: str | None = None
    ray_dests: frozenset[str] = frozenset()
    port = "5000"  # any free port of the head; the same on every node
    image = "lmsysorg/sglang:v{version}"  # the project's serving image (LWS manifests)
    api_port = 30000  # launch_server --port default

    def write(self, executor: str, node: int, nnodes: int, head: str,
              dp: int = 1) -> list[tuple[str, str | None, str]]:
        host, _, port = head.partition(":")
        return [("--nnodes", str(nnodes), "machines (topology.nodes)"),
                ("--node-rank", str(node), "this node" + (" (the head)" if node == 0 else "")),
                ("--dist-init-addr", f"{host}:{port or self.port}",
                 "the head node's address, the same on every node")]


# Spec keys a launch line cannot state, kept from the base spec: topology.backend,
# speculative.sampling / aux_layers, and draft_tp, which SGLang has no flag for.
LAUNCH = LaunchTable(
    program="python -m sglang.launch_server", modules=("sglang.launch_server",),
    serve="sglang serve", env_prefix="SGLANG_", env=ENV,
    pp_partition_env="SGLANG_PP_LAYER_PARTITION", modelled=SGLANG_MODELLED,
    unstated=frozenset({"backend", "sampling", "aux_layers", "draft_tp"}),
    env_defaults=frozenset({("SGLANG_SPEC_TP_SYNC", "all")}),
    disaggregation=SGLangFlags(), nodes=SGLangNodes())
