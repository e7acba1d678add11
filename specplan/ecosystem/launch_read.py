"""A launch line's arguments (argparse dest -> value) -> the spec keys they plan.

Readers per engine (READERS, each declaring its engine), driven by the engine's launch table
(engines/<engine>/launch.py, `modelled`): topology, model (path, dtype, KV dtype, MoE
all-to-all and EPLB), speculative, runtime (async scheduling, capacity) and, for SGLang's
DSpark / DFlash, `_sync_slugs` (its SpecTpSync set). `notes` collects what import prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import overload

from specplan.ecosystem.flags import (DEEPEP_BACKENDS, DRAFT_PLACEHOLDER, DTYPE_ALIASES,
                                      FP8_QUANTIZATION, KV_CACHE_DTYPES, MODEL_PLACEHOLDER,
                                      NO_A2A_BACKENDS)
from specplan.engines.base import PerEngine
from specplan.engines.sglang import spec_tp_sync
from specplan.engines.sglang.convention import SGLang
from specplan.engines.sglang.launch import EP_SPANNING_A2A as SGLANG_EP_SPANNING_A2A
from specplan.engines.vllm.convention import VLLM
from specplan.engines.vllm.launch import ASCEND_ADDITIONAL_CONFIG
from specplan.engines.vllm.launch import SPEC_KEYS as VLLM_SPEC_KEYS

# argparse dest -> value (plus `_written`, `_conv`), the environment, notes -> spec data
READERS: PerEngine[Callable[[dict, dict, list[str]], dict]] = PerEngine("launch-line reader")
from specplan.methods import get_method


class ImportProblem(Exception):
    """The launch line says something specplan cannot read; the message names it."""


class FlagRefused(ImportProblem):
    """The release's parser refuses a word of the line (another release's may accept it)."""


def _newest(engine: str) -> str:
    from specplan.engines import convention

    return convention(engine).title


@overload
def _int(values: dict, dest: str, flag: str, default: int = 1) -> int: ...
@overload
def _int(values: dict, dest: str, flag: str, default: None) -> int | None: ...


def _int(values: dict, dest: str, flag: str, default: int | None = 1) -> int | None:
    """A size the line states: a positive integer (both engines refuse 0 and negative sizes;
    dropping one would plan a topology the line does not say)."""
    if values.get(dest) is None:
        return default
    value = values[dest]
    try:
        number = int(value) if not isinstance(value, (bool, float)) else None
    except (TypeError, ValueError):
        number = None
    if number is None:
        raise ImportProblem(f"{flag} expects an integer, found {value!r}")
    if number < 1:
        raise ImportProblem(f"{flag} {value}: expected a positive integer (a size of at least 1)")
    return number


def _zbal(env: dict) -> bool:
    """SGLang picks zbal for npu when SGLANG_ZBAL_LOCAL_MEM_SIZE (an int, default 0) is > 0."""
    value = env.get("SGLANG_ZBAL_LOCAL_MEM_SIZE", "0").strip()
    try:
        return int(value) > 0
    except ValueError:
        raise ImportProblem(f"SGLANG_ZBAL_LOCAL_MEM_SIZE={value!r} is not an integer (MB)") from None


def _path(value, placeholder: str, flag: str = "a checkpoint path") -> str | None:
    if value in (None, placeholder, "$" + placeholder):
        return None
    if not isinstance(value, str):  # a JSON form (`--speculative-config.model [1]`) is no path
        raise ImportProblem(f"{flag}: expected a checkpoint path or hub name, found {json.dumps(value)}")
    return value


def _sizes(**sizes) -> dict:
    return {k: v for k, v in sizes.items() if k == "tp" or v is True or type(v) is int and v > 1}


@READERS.of(SGLang)
def read_sglang(v: dict, env: dict, notes: list[str]) -> dict:
    dp, attn_dp = _int(v, "dp_size", "--dp-size"), _int(v, "attn_dp_size", "--attn-dp-size")
    if attn_dp > 1 and dp > 1:
        raise ImportProblem(f"--dp-size {dp} replicas of an attention-DP block (--attn-dp-size "
                            f"{attn_dp}) have no spec spelling: topology.dp is one or the other")
    dp_attention = attn_dp > 1 or bool(v.get("enable_dp_attention")) and dp > 1
    if v.get("enable_dp_attention") and dp > 1:
        said = v["_written"].get("dp_size", f"--dp-size {dp}")
        notes.append(f"{said} --enable-dp-attention is {_newest('sglang')}'s older spelling of "
                     f"--attn-dp-size {dp}; kept as written")
    topo = _sizes(tp=_int(v, "tp_size", "--tp-size"), pp=_int(v, "pp_size", "--pp-size"),
                  dp=attn_dp if attn_dp > 1 else dp, dp_attention=dp_attention,
                  cp=_int(v, "attn_cp_size", "--attn-cp-size"), dcp=_int(v, "dcp_size", "--dcp-size"),
                  ep=_int(v, "ep_size", "--ep-size"), moe_dp=_int(v, "moe_dp_size", "--moe-dp-size"),
                  nodes=_int(v, "nnodes", "--nnodes"), dp_lm_head=bool(v.get("enable_dp_lm_head")))
    a2a = v.get("moe_a2a_backend")
    if a2a in SGLANG_EP_SPANNING_A2A and topo.get("ep", 1) != topo["tp"]:
        notes.append(f"--moe-a2a-backend {a2a} sets the expert parallel size to the tensor "
                     f"parallel size, {topo['tp']} ({v['_conv'].title} overrides.py _a2a_ep_size)")
    if a2a in SGLANG_EP_SPANNING_A2A and topo["tp"] > 1:
        topo["ep"] = topo["tp"]
    device = v.get("device")
    if device is not None:
        if device not in ("cuda", "npu", "cpu"):
            raise ImportProblem(f"--device {device}: specplan plans cuda | rocm | npu | cpu")
        if device != "cuda":
            topo["device"] = device
    if device == "npu" and _zbal(env):
        topo["backend"] = "zbal"
        notes.append("SGLANG_ZBAL_LOCAL_MEM_SIZE > 0 on npu: SGLang's collectives run on zbal, not "
                     "hccl (SGLang 0.5.23 platforms/device_mixin.py _DEVICE_TO_DISTRIBUTED_BACKEND)")
    runtime: dict[str, bool | int] = {}
    if v.get("disable_overlap_schedule") and topo.get("pp", 1) == 1:
        runtime["async_scheduling"] = False  # under pipeline parallel SGLang requires it anyway
    cap = _int(v, "cuda_graph_max_bs_decode", "--cuda-graph-max-bs-decode", None)
    if cap is not None:
        runtime["max_batch"] = cap
    spec = _sglang_speculative(v, notes)
    slugs = None
    if "method" in spec and spec_tp_sync.has_sites(get_method(spec["method"])):
        try:
            slugs = spec_tp_sync.parse(env.get("SGLANG_SPEC_TP_SYNC", "all"))
        except ValueError as exc:
            raise ImportProblem(str(exc)) from None
    moe = _moe(v.get("moe_a2a_backend"), "--moe-a2a-backend", v.get("enable_eplb"), notes)
    return {"topology": topo, "model": _model(v, v.get("model_path"), notes), "moe": moe,
            "speculative": spec, "runtime": runtime, "_sync_slugs": slugs}


def _model(v: dict, path, notes: list[str]) -> dict:
    path = _path(path, MODEL_PLACEHOLDER)
    model = {"path": path} if path else {}
    dtype = v.get("dtype")
    if dtype not in (None, "auto"):
        if dtype not in DTYPE_ALIASES:
            raise ImportProblem(f"--dtype {dtype} has no model.dtype; expected one of "
                                f"{', '.join(DTYPE_ALIASES)}")
        model["dtype"] = DTYPE_ALIASES[dtype]
    if v.get("quantization") in FP8_QUANTIZATION:
        model["dtype"] = "fp8"  # FP8 activations: taps and stage payloads are 1 byte wide
    elif v.get("quantization") is not None:
        notes.append(f"--quantization {v['quantization']}: weights only for the plan; "
                     "activations stay model.dtype")
    page = v.get("page_size", v.get("block_size"))  # SGLang --page-size, vLLM --block-size
    if page is not None:
        model["page_size"] = _int(v, "page_size" if "page_size" in v else "block_size",
                                  "--page-size" if "page_size" in v else "--block-size")
    kv = v.get("kv_cache_dtype")
    if kv is not None and kv in KV_CACHE_DTYPES:
        model["kv_cache_dtype"] = KV_CACHE_DTYPES[kv]
    elif kv is not None:
        notes.append(f"--kv-cache-dtype {kv}: specplan sizes KV as auto | bf16 | fp16 | fp8_e4m3 "
                     "| fp8_e5m2, so the KV handoff bytes are not planned for it")
    return model


def _moe(backend, flag: str, eplb, notes: list[str]) -> dict:
    out: dict[str, str | bool] = {}
    if backend in DEEPEP_BACKENDS:
        out["a2a"] = "deepep"
    elif backend is not None and backend not in NO_A2A_BACKENDS:
        notes.append(f"{flag} {backend}: planned as MoE without an all-to-all backend (specplan "
                     "plans none | deepep)")
    if eplb:
        out["eplb"] = True
    return out


def _sglang_speculative(v: dict, notes: list[str]) -> dict:
    algo = v.get("speculative_algorithm")
    if algo is None:
        return {}
    method = SGLang.methods.named(algo.upper())
    if method is None:
        raise ImportProblem(f"--speculative-algorithm {algo}: specplan plans "
                            f"{', '.join(SGLang.methods.names().values())}")
    out: dict = {"method": method}
    width = _int(v, "speculative_num_draft_tokens", "--speculative-num-draft-tokens", None)
    m = SGLang.methods.method(method)
    if m.round == "block":  # SGLang names each block method's width flag after the method
        block = _int(v, f"speculative_{method}_block_size", f"--speculative-{method}-block-size", None)
        steps = m.steps_of_block(block) if block is not None else None
        steps = steps if steps is not None else (width - 1 if width else None)
        if steps is None:
            raise ImportProblem(f"the {algo} draft width is not on the command line (SGLang reads "
                                f"it from the draft checkpoint): pass "
                                f"--speculative-{method}-block-size")
        out["num_steps"] = steps
    else:
        out.update(_sglang_widths(v, algo.upper(), m.trie, width, notes))
    draft = _path(v.get("speculative_draft_model_path"), DRAFT_PLACEHOLDER)
    if draft:
        out["draft_path"] = draft
    return out


def _sglang_widths(v: dict, algo: str, trie: bool, width: int | None, notes: list[str]) -> dict:
    """num_steps, topk and num_draft_tokens of an EAGLE-family or n-gram line, as SGLang
    resolves them. A trie (SGLang's NGRAM, methods/ngram.py) takes topk from
    --speculative-ngram-max-bfs-breadth, default 10, whatever --speculative-eagle-topk says, and
    12 draft tokens by default (_handle_ngram declares speculative_eagle_topk =
    speculative_ngram_max_bfs_breadth; the same in 0.5.20 .. 0.5.23)."""
    from specplan.engines.sglang import defaults as d

    steps = _int(v, "speculative_num_steps", "--speculative-num-steps", None)
    topk = _int(v, "speculative_eagle_topk", "--speculative-eagle-topk", None)
    breadth = _int(v, "speculative_ngram_max_bfs_breadth", "--speculative-ngram-max-bfs-breadth", None)
    release, name = d.of_release(v["_conv"].version)  # the release the line is read as
    runs = breadth or release.ngram_bfs_breadth
    if trie and topk is not None and topk != runs:
        notes.append(f"--speculative-eagle-topk {topk} is not what SGLang's {algo} runs: it takes "
                     f"topk from --speculative-ngram-max-bfs-breadth, {runs}"
                     + ("" if breadth else " by default") + f" (_handle_ngram); imported as topk "
                     f"{runs}, the flag kept as written")
    if steps is None:  # SGLang's own defaults, chosen once the model config is read
        return {"_auto": {"algorithm": algo, "trie": trie, "topk": topk, "draft_tokens": width,
                          "breadth": breadth}}
    if trie:
        topk = runs
        if width is None:
            width = release.ngram_draft_tokens
            notes.append(f"num_draft_tokens {width}: {name}'s {algo} default (_handle_ngram)")
    out: dict = {"num_steps": steps}
    if (topk or 1) > 1:
        out["topk"] = topk
    if width is not None and width != steps + 1:
        out["num_draft_tokens"] = width
    return out


@READERS.of(VLLM)
def read_vllm(v: dict, env: dict, notes: list[str]) -> dict:
    tp = _int(v, "tensor_parallel_size", "--tensor-parallel-size")
    dp = _int(v, "data_parallel_size", "--data-parallel-size")
    cp = _int(v, "prefill_context_parallel_size", "--prefill-context-parallel-size")
    pp = _int(v, "pipeline_parallel_size", "--pipeline-parallel-size")
    ep = dp * cp * tp if v.get("enable_expert_parallel") else 1
    nodes = _int(v, "nnodes", "--nnodes")
    local = _int(v, "data_parallel_size_local", "--data-parallel-size-local", None)
    if local is not None and "nnodes" not in v:
        if local < 1 or dp % local:
            raise ImportProblem(f"--data-parallel-size-local {local} does not divide "
                                f"--data-parallel-size {dp}")
        nodes = dp // local  # each node runs `local` replicas of tp * pp * pcp GPUs
    topo = _sizes(tp=tp, pp=pp, dp=dp, cp=cp,
                  dcp=_int(v, "decode_context_parallel_size", "--decode-context-parallel-size"),
                  ep=ep, nodes=nodes)
    ascend = _ascend_keys(v.get("additional_config"))
    if ascend:
        topo["device"] = "npu"
        notes.append(f"topology.device npu: --additional-config {', '.join(ascend)} is read only "
                     "by the vllm-ascend platform plugin (ascend_config.py AscendConfig), which "
                     "runs the line on Ascend NPUs")
    if env.get("VLLM_USE_V2_MODEL_RUNNER") in ("0", "false", "False"):
        raise ImportProblem("VLLM_USE_V2_MODEL_RUNNER=0: specplan models vLLM's Model Runner V2")
    runtime: dict[str, bool | int] = {}
    if v.get("async_scheduling") is not None:
        runtime["async_scheduling"] = bool(v["async_scheduling"])
    model = _model(v, v.get("model_tag") or v.get("model"), notes)
    moe = _moe(v.get("all2all_backend"), "--all2all-backend", v.get("enable_eplb"), notes)
    return {"topology": topo, "model": model, "moe": moe, "runtime": runtime,
            "speculative": _vllm_speculative(_vllm_spec_config(v), notes, v["_conv"]),
            "_sync_slugs": None}


def _ascend_keys(config: object) -> list[str]:
    """The vllm-ascend keys of --additional-config (a JSON object, or its text)."""
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except json.JSONDecodeError:
            return []
    return sorted(set(config) & ASCEND_ADDITIONAL_CONFIG) if isinstance(config, dict) else []


def _vllm_spec_config(v: dict):
    """--speculative-config as vLLM builds it (EngineArgs.create_speculative_config): the
    --spec-method / --spec-model / --spec-tokens flags set its method / model /
    num_speculative_tokens (each refused beside the same key in the JSON), then every key's
    dashes become underscores."""
    config = v.get("speculative_config")
    for flag, key, dest in (("--spec-method", "method", "spec_method"),
                            ("--spec-model", "model", "spec_model"),
                            ("--spec-tokens", "num_speculative_tokens", "spec_tokens")):
        if v.get(dest) is None:
            continue
        config = {} if config is None else config
        if not isinstance(config, dict) or key in config:
            raise ImportProblem(f"{flag} and --speculative-config['{key}'] are mutually exclusive "
                                "(vLLM EngineArgs.create_speculative_config refuses both)")
        config = {**config, key: v[dest]}
    if isinstance(config, dict):
        config = {k.replace("-", "_"): val for k, val in config.items()}
    return config


def _vllm_speculative(config, notes: list[str], conv) -> dict:
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ImportProblem(f"--speculative-config is not a JSON object: {json.dumps(config)}")
    # its keys were checked against the release's SpeculativeConfig (argv.check_json_keys)
    notes += [f"kept, not planned: --speculative-config key {k}" for k in config
              if k not in VLLM_SPEC_KEYS]
    name = config.get("method")
    out: dict = {}
    if name is None:  # vLLM fills it in from the draft (import_line.detect_vllm_method)
        out["_detect"] = {"model": config.get("model")}
    else:
        out["method"] = vllm_method_of(name)
    if config.get("num_speculative_tokens") is None:  # vLLM's default, from the model config
        out["_auto"] = {"vllm_method": out.get("method")}
    else:
        out["num_steps"] = _int(config, "num_speculative_tokens",
                                "--speculative-config num_speculative_tokens")
    draft = _path(config.get("model"), DRAFT_PLACEHOLDER, "--speculative-config model")
    if draft:
        out["draft_path"] = draft
    if "draft_tensor_parallel_size" in config:
        out["draft_tp"] = _int(config, "draft_tensor_parallel_size",
                               "--speculative-config draft_tensor_parallel_size")
    return out



def vllm_method_of(name: object) -> str:
    """specplan's method for vLLM's speculative_config method `name`."""
    method = VLLM.methods.named(name)
    if method is None:
        raise ImportProblem(f"--speculative-config method {name!r}: specplan plans "
                            f"{', '.join(VLLM.methods.names().values())} (and *_mtp)")
    return method
