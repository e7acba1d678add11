"""An engine command line (and its SGLANG_* / VLLM_* environment) -> spec data.

What a launch line cannot say (the model's shape, sampling, runtime) comes from a base spec
(`--base`) or the checkpoint's config.json (a local model path, or `--model-config`).
Without a base, the spec models what the engine itself does (`behaviour: engine`). With a
base whose plan already matches the engine's SGLANG_SPEC_TP_SYNC, the base's sync section
is kept, so import(export(spec), base=spec) gives the spec back; the placeholders
MODEL_PATH / DRAFT_MODEL_PATH that export prints for unset paths come back unset.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex

from specplan.ecosystem import spec_tp_sync
from specplan.ecosystem.flags import (DRAFT_PLACEHOLDER, DTYPE_ALIASES, MODEL_PLACEHOLDER,
                                      SGLANG_ALGORITHMS, SGLANG_ENV, SITE_SLUGS, VLLM_ENV,
                                      VLLM_METHODS, VLLM_SPEC_IGNORED, VLLM_SPEC_KEYS, table)
from specplan.ecosystem.yaml_out import spec_data
from specplan.schema import Spec

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_PROGRAM_ENDS = {"sglang": ("sglang.launch_server", "launch_server"), "vllm": ("serve",)}


class ImportProblem(Exception):
    """The launch line says something specplan cannot read; the message names it."""


def parse_script(text: str) -> tuple[dict[str, str], list[str]]:
    """(env, argv) of a shell launch script: `export X=y` lines, `X=y cmd ...` prefixes,
    an `args=( ... )` array expanded where `"${args[@]}"` stands (specplan export's form), or
    `\\`-continued command lines."""
    env: dict[str, str] = {}
    argv: list[str] = []
    array: list[str] | None = None
    argv_array: list[str] = []
    for line in text.replace("\\\n", " ").splitlines():
        tokens = shlex.split(line, comments=True)
        if tokens[:1] == ["export"]:
            tokens = tokens[1:]
        if tokens and tokens[0].startswith("args=("):
            array, tokens = [], [tokens[0][len("args=("):], *tokens[1:]]
        if array is not None and ")" in tokens:
            array.extend(t for t in tokens[:tokens.index(")")] if t)
            tokens = tokens[tokens.index(")") + 1:]
            argv_array, array = array, None
            continue
        if array is not None:
            array.extend(t for t in tokens if t)
            continue
        while tokens and _ENV_NAME.match(tokens[0]):
            name, _, value = tokens.pop(0).partition("=")
            env[name] = value
        if "${args[@]}" in tokens:
            at = tokens.index("${args[@]}")
            tokens = tokens[:at] + argv_array + tokens[at + 1:]
        argv.extend(tokens)
    return env, argv


def split_command(engine: str, argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading VAR=value words, then the program (python -m sglang.launch_server, vllm
    serve) dropped; what follows the program is returned."""
    env, rest = {}, list(argv)
    while rest and _ENV_NAME.match(rest[0]):
        name, _, value = rest.pop(0).partition("=")
        env[name] = value
    for i, token in enumerate(rest):
        if token in _PROGRAM_ENDS[engine] or token.endswith(_PROGRAM_ENDS[engine][0]):
            return env, rest[i + 1:]
    return env, rest


def parse_flags(engine: str, argv: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """{canonical flag: value} and positional words; ImportProblem on an unknown flag."""
    known = table(engine)
    flags: dict[str, str | None] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if not token.startswith("-") or token == "-":
            positional.append(token)
            continue
        name, eq, value = token.partition("=")
        flag = known.get(name)
        if flag is None:
            close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise ImportProblem(f"unknown {engine} flag {name}{hint}")
        if flag.takes_value and not eq:
            if i >= len(argv):
                raise ImportProblem(f"{name} needs a value")
            value, i = argv[i], i + 1
        flags[flag.name] = value if flag.takes_value else None
    return flags, positional


def _int(flags: dict, name: str, default: int | None = 1) -> int | None:
    if name not in flags:
        return default
    try:
        return int(flags[name])
    except ValueError:
        raise ImportProblem(f"{name} expects an integer, found {flags[name]!r}") from None


def _path(value: str | None, placeholder: str) -> str | None:
    return None if value in (None, placeholder) else value


def read_launch(engine: str, env: dict[str, str], argv: list[str]) -> dict:
    """The spec data a launch line states: topology, model (path, dtype, pp_partition),
    speculative (method and widths) and `_sync_slugs` (SGLang's SpecTpSync set, if any)."""
    env_here, argv = split_command(engine, argv)
    env = {**env, **env_here}
    flags, positional = parse_flags(engine, argv)
    out = _READERS[engine](flags, positional, env)
    out["disaggregation"] = _disaggregation(engine, flags)
    model = out["model"]
    dtype = flags.get("--dtype")
    if dtype not in (None, "auto"):
        if dtype not in DTYPE_ALIASES:
            raise ImportProblem(f"--dtype {dtype} has no model.dtype; expected one of "
                                f"{', '.join(DTYPE_ALIASES)}")
        model["dtype"] = DTYPE_ALIASES[dtype]
    part = env.get(f"{engine.upper()}_PP_LAYER_PARTITION")
    if part:
        try:
            model["pp_partition"] = [int(x) for x in part.split(",")]
        except ValueError:
            raise ImportProblem(f"{engine.upper()}_PP_LAYER_PARTITION={part!r} is not a "
                                "comma-separated list of layer counts") from None
    return out


def _disaggregation(engine: str, flags: dict) -> dict | None:
    from specplan.deploy.launch import FLAGS, LaunchProblem

    try:
        return FLAGS[engine].read(flags)
    except LaunchProblem as exc:
        raise ImportProblem(str(exc)) from None


def _sizes(**sizes) -> dict:
    return {k: v for k, v in sizes.items() if k == "tp" or v is True or type(v) is int and v > 1}


def _sglang(flags: dict, positional: list[str], env: dict) -> dict:
    if positional:
        raise ImportProblem(f"unexpected word {positional[0]!r} on the SGLang command line")
    dp, attn_dp = _int(flags, "--dp-size"), _int(flags, "--attn-dp-size")
    if attn_dp > 1 and dp > 1:
        raise ImportProblem(f"--dp-size {dp} replicas of an attention-DP block (--attn-dp-size "
                            f"{attn_dp}) have no spec spelling: topology.dp is one or the other")
    dp_attention = attn_dp > 1 or "--enable-dp-attention" in flags and dp > 1
    topo = _sizes(tp=_int(flags, "--tp-size"), pp=_int(flags, "--pp-size"),
                  dp=attn_dp if attn_dp > 1 else dp, dp_attention=dp_attention,
                  cp=_int(flags, "--attn-cp-size"), dcp=_int(flags, "--dcp-size"),
                  ep=_int(flags, "--ep-size"), moe_dp=_int(flags, "--moe-dp-size"),
                  nodes=_int(flags, "--nnodes"))
    device = flags.get("--device")
    if device is not None:
        if device not in ("cuda", "npu", "cpu"):
            raise ImportProblem(f"--device {device}: specplan plans cuda | rocm | npu | cpu")
        if device != "cuda":
            topo["device"] = device
    model = _model_path(flags.get("--model-path"))
    spec = _sglang_speculative(flags)
    slugs = None
    if spec.get("method") in ("dspark", "dflash"):
        try:
            slugs = spec_tp_sync.parse(env.get("SGLANG_SPEC_TP_SYNC", "all"))
        except ValueError as exc:
            raise ImportProblem(str(exc)) from None
    return {"topology": topo, "model": model, "speculative": spec, "_sync_slugs": slugs}


def _model_path(path: str | None) -> dict:
    path = _path(path, MODEL_PLACEHOLDER)
    return {"path": path} if path else {}


def _sglang_speculative(flags: dict) -> dict:
    algo = flags.get("--speculative-algorithm")
    if algo is None:
        return {}
    by_name = {v: k for k, v in SGLANG_ALGORITHMS.items()}
    method = by_name.get(algo.upper())
    if method is None:
        raise ImportProblem(f"--speculative-algorithm {algo}: specplan plans "
                            f"{', '.join(SGLANG_ALGORITHMS.values())}")
    out: dict = {"method": method}
    width = _int(flags, "--speculative-num-draft-tokens", None)
    if method in ("dspark", "dflash"):
        block = _int(flags, f"--speculative-{method}-block-size", None)
        steps = block if method == "dspark" else (block - 1 if block else None)
        steps = steps if steps is not None else (width - 1 if width else None)
        if steps is None:
            raise ImportProblem(f"the {algo} draft width is not on the command line (SGLang reads "
                                f"it from the draft checkpoint): pass "
                                f"--speculative-{method}-block-size")
        out["num_steps"] = steps
    else:
        steps = _int(flags, "--speculative-num-steps", None)
        if steps is None:
            raise ImportProblem("--speculative-num-steps is missing (SGLang picks a per-model "
                                "default that specplan cannot know)")
        out["num_steps"] = steps
        topk = _int(flags, "--speculative-eagle-topk")
        if topk > 1:
            out["topk"] = topk
        if width is not None and width != steps + 1:
            out["num_draft_tokens"] = width
    draft = _path(flags.get("--speculative-draft-model-path"), DRAFT_PLACEHOLDER)
    if draft:
        out["draft_path"] = draft
    return out


def _vllm(flags: dict, positional: list[str], env: dict) -> dict:
    if len(positional) > 1:
        raise ImportProblem(f"unexpected word {positional[1]!r} after the model on the vLLM "
                            "command line")
    tp, dp, cp = (_int(flags, f) for f in ("--tensor-parallel-size", "--data-parallel-size",
                                           "--prefill-context-parallel-size"))
    ep = dp * cp * tp if "--enable-expert-parallel" in flags else 1
    topo = _sizes(tp=tp, pp=_int(flags, "--pipeline-parallel-size"), dp=dp, cp=cp,
                  dcp=_int(flags, "--decode-context-parallel-size"), ep=ep,
                  nodes=_int(flags, "--nnodes"))
    model = _model_path(positional[0] if positional else flags.get("--model"))
    spec = _vllm_speculative(flags.get("--speculative-config"))
    if env.get("VLLM_USE_V2_MODEL_RUNNER") in ("0", "false", "False"):
        raise ImportProblem("VLLM_USE_V2_MODEL_RUNNER=0: specplan models vLLM's Model Runner V2")
    return {"topology": topo, "model": model, "speculative": spec, "_sync_slugs": None}


def _vllm_speculative(text: str | None) -> dict:
    if text is None:
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportProblem(f"--speculative-config is not JSON: {exc}") from None
    for key in config:
        if key not in VLLM_SPEC_KEYS + VLLM_SPEC_IGNORED:
            close = difflib.get_close_matches(key, VLLM_SPEC_KEYS + VLLM_SPEC_IGNORED, n=3)
            hint = f"; close matches: {', '.join(close)}" if close else ""
            raise ImportProblem(f"unknown --speculative-config key {key!r}{hint}")
    by_name = {v: k for k, v in VLLM_METHODS.items()}
    name = config.get("method")
    method = "mtp" if isinstance(name, str) and name.endswith("_mtp") else by_name.get(name)
    if method is None:
        raise ImportProblem(f"--speculative-config method {name!r}: specplan plans "
                            f"{', '.join(VLLM_METHODS.values())} (and *_mtp)")
    if "num_speculative_tokens" not in config:
        raise ImportProblem("--speculative-config has no num_speculative_tokens")
    out: dict = {"method": method, "num_steps": int(config["num_speculative_tokens"])}
    draft = _path(config.get("model"), DRAFT_PLACEHOLDER)
    if draft:
        out["draft_path"] = draft
    if "draft_tensor_parallel_size" in config:
        out["draft_tp"] = int(config["draft_tensor_parallel_size"])
    return out


def ignored_env(engine: str, env: dict[str, str]) -> list[str]:
    """The engine's variables in `env` that import does not read."""
    prefix, known = _ENV[engine]
    return sorted(k for k in env if k.startswith(prefix) and k not in known)


def model_shape(config: dict) -> dict:
    """model.{num_layers, hidden_size, vocab_size, moe} from a Hugging Face config.json."""
    config = config.get("text_config", config)
    out = {}
    for key, names in (("num_layers", ("num_hidden_layers", "n_layer", "num_layers")),
                       ("hidden_size", ("hidden_size", "d_model")),
                       ("vocab_size", ("vocab_size",))):
        value = next((config[n] for n in names if n in config), None)
        if value is not None:
            out[key] = value
    experts = next((config[n] for n in ("n_routed_experts", "num_experts", "num_local_experts")
                    if config.get(n)), None)
    if experts and config.get("num_experts_per_tok"):
        out["moe"] = {"num_experts": experts, "top_k": config["num_experts_per_tok"]}
    return out


def build(engine: str, launch: dict, base: Spec | None, shape: dict, name: str | None) -> dict:
    """Spec data: the base (or the engine's own behaviour) with the launch line on top."""
    data = spec_data(base) if base else {"behaviour": "engine"}
    data["engine"] = engine
    data["name"] = name or data.get("name") or _name(launch["model"].get("path"))
    keep = {k: v for k, v in data.get("topology", {}).items()
            if k in _UNSTATED[engine]}
    data["topology"] = {**keep, **launch["topology"]}
    model = {k: v for k, v in data.get("model", {}).items()
             if k not in ("path", "dtype", "pp_partition")}
    data["model"] = {**model, **shape, **launch["model"]}
    spec = {k: v for k, v in data.get("speculative", {}).items()
            if k in _UNSTATED[engine]}
    if launch["speculative"]:
        data["speculative"] = {**spec, **launch["speculative"]}
    else:
        data.pop("speculative", None)
    missing = [k for k in ("num_layers", "hidden_size", "vocab_size") if k not in data["model"]]
    if missing:
        raise ImportProblem(f"the launch line does not give the model's shape ({', '.join(missing)}): "
                            "pass --base SPEC, --model-config config.json, or a local model path")
    _sync(data, launch.get("_sync_slugs"), base)
    if launch.get("disaggregation"):  # the peer comes from the base, else the user names it
        data["disaggregation"] = {**data.get("disaggregation", {}), **launch["disaggregation"]}
    return data


def _name(path: str | None) -> str:
    base = os.path.basename((path or "").rstrip("/")).lower()
    slug = re.sub(r"[^a-z0-9_.-]+", "-", base).strip("-._")
    return slug or "imported"


def _sync(data: dict, slugs: frozenset[str] | None, base: Spec | None) -> None:
    """SGLANG_SPEC_TP_SYNC -> sync: keep the base's when its plan agrees, else spell it."""
    if slugs is None:
        return
    method = data["speculative"]["method"]
    sites = [s for s in SITE_SLUGS if s.startswith(method + "_")]
    if base is not None and _base_agrees(data, slugs):
        return
    states = spec_tp_sync.site_states(sites, slugs)
    for preset in ("all", "rng", "init", "off"):
        if spec_tp_sync.site_states(sites, spec_tp_sync.parse(preset)) == states:
            data["sync"] = {**data.get("sync", {}), "policy": preset}
            data["sync"].pop("sites", None)
            return
    data["sync"] = {**data.get("sync", {}), "policy": "all",
                    "sites": {s: "on" if on else "off" for s, on in states.items() if not on}}


def _base_agrees(data: dict, slugs: frozenset[str]) -> bool:
    from specplan.ecosystem.yaml_out import reload
    from specplan.passes import plan

    sites = plan(reload(data)).graph.sections["sites"]
    states = {n: e["converge"] for n, e in sites.items()}
    care = spec_tp_sync.slugs_of(states, only_on=False)
    return spec_tp_sync.slugs_of(states) == slugs & care


_READERS = {"sglang": _sglang, "vllm": _vllm}
_ENV = {"sglang": ("SGLANG_", SGLANG_ENV), "vllm": ("VLLM_", VLLM_ENV)}
# Spec keys a launch line cannot state, kept from the base spec: topology.backend (and the
# device, which vLLM's line does not name), speculative.sampling / aux_layers (and SGLang's
# draft_tp, which it has no flag for).
_UNSTATED = {"sglang": {"backend", "sampling", "aux_layers", "draft_tp"},
             "vllm": {"backend", "device", "sampling", "aux_layers"}}
