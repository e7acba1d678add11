"""Run in its own process (the harnesses' stubs differ per engine): parse each argv of a JSON
list with the engine's real parser (flag_tables.py) and report what the multi-node fields read,
plus what the engine's own checks of them say. argv: engine, JSON [[words after the program]].

vLLM: ParallelConfig (vllm/config/parallel.py) built from the node's values, as EngineArgs
would, with the mp executor and, for the Ray head, with nnodes 2 and the Ray executor (which
vLLM refuses). SGLang: NetworkAddress.parse (sglang/srt/utils/network.py) of --dist-init-addr,
and of the host alone (which it refuses)."""

from __future__ import annotations

import json
import sys


def vllm(lines: list[list[str]]) -> list[dict]:
    from flag_tables import vllm_parser

    parser = vllm_parser()
    from vllm.config import ParallelConfig

    out = []
    for words in lines:
        ns = parser.parse_args(words)
        row = {k: getattr(ns, k) for k in ("nnodes", "node_rank", "master_addr", "master_port",
                                           "headless", "distributed_executor_backend",
                                           "tensor_parallel_size", "pipeline_parallel_size")}
        backend = ns.distributed_executor_backend or "mp"
        row["config"] = _built(lambda: ParallelConfig(
            tensor_parallel_size=ns.tensor_parallel_size,
            pipeline_parallel_size=ns.pipeline_parallel_size, nnodes=ns.nnodes,
            node_rank=ns.node_rank, master_addr=ns.master_addr, distributed_executor_backend=backend))
        row["config_nnodes_2"] = _built(lambda: ParallelConfig(
            tensor_parallel_size=ns.tensor_parallel_size, nnodes=2,
            distributed_executor_backend=backend))
        out.append(row)
    return out


def sglang(lines: list[list[str]]) -> list[dict]:
    from flag_tables import sglang_parser

    parser = sglang_parser()
    from sglang.srt.utils.network import NetworkAddress

    out = []
    for words in lines:
        ns = parser.parse_args(words)
        addr = ns.dist_init_addr
        out.append({"nnodes": ns.nnodes, "node_rank": ns.node_rank, "dist_init_addr": addr,
                    "parsed": _built(lambda: str(NetworkAddress.parse(addr).port)),
                    "host_only": _built(lambda: str(NetworkAddress.parse(addr.rpartition(":")[0])))})
    return out


def _built(make) -> str:
    try:
        value = make()
    except Exception as exc:  # the engine's own refusal, reported
        return "refused: " + " ".join(str(exc).split())
    return value if isinstance(value, str) else "ok"


if __name__ == "__main__":
    engine, lines = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({"vllm": vllm, "sglang": sglang}[engine](lines)))
