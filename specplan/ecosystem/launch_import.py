"""An engine command line (and its SGLANG_* / VLLM_* environment) -> spec data.

What a launch line cannot say (the model's shape, sampling, runtime) comes from a base spec
(`--base`) or the checkpoint's config.json (a local model path, or `--model-config`).
Without a base, the spec models what the engine itself does (`behaviour: engine`). With a
base whose plan already matches the engine's SGLANG_SPEC_TP_SYNC, the base's sync section
is kept, so import(export(spec), base=spec) gives the spec back; the placeholders
MODEL_PATH / DRAFT_MODEL_PATH that export prints for unset paths come back unset.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
from typing import Any, cast

from specplan.ecosystem.argv import check_json_keys, read_words
from specplan.ecosystem.shell import parse_script, shell_words
from specplan.ecosystem.flags import DRAFT_PLACEHOLDER, MODEL_PLACEHOLDER
from specplan.ecosystem.launch_read import READERS, FlagRefused, ImportProblem
from specplan.ecosystem.yaml_out import spec_data
from specplan.engines import convention
from specplan.engines.sglang import spec_tp_sync
from specplan.engines.flag_table import FlagProblem
from specplan.engines.sglang.spec_tp_sync import SITE_SLUGS
from specplan.methods import METHODS
from specplan.plan import given
from specplan.schema import Spec

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*=")
_PLACEHOLDER_WORDS = {"$" + MODEL_PLACEHOLDER, "$" + DRAFT_PLACEHOLDER}
__all__ = ["FlagRefused", "ImportProblem", "build", "parse_script", "read_launch"]


def split_command(engine: str, argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(leading VAR=value words, the program's words, the arguments after them). The program
    is `python -m sglang.launch_server`, `sglang serve` or `vllm serve`; none found: every word
    is an argument."""
    rest = list(argv)
    env = []
    while rest and _ENV_NAME.match(rest[0]):
        env.append(rest.pop(0))
    launch = convention(engine).launch
    modules = launch.modules  # `python -m MODULE` entry points
    cli = launch.serve  # the console script: `sglang serve`, `vllm serve`
    for i, token in enumerate(rest):
        before = rest[i - 1].rsplit("/", 1)[-1] if i else ""
        if before == "-m" and token in modules or f"{before} {token}" == cli:
            return env, rest[:i + 1], rest[i + 1:]
    return env, [], rest


def read_launch(engine: str, env: dict[str, str], argv: list[str],
                version: str | None = None) -> dict:
    """The spec data a launch line states (topology, model, moe, speculative, runtime,
    disaggregation, `_sync_slugs`), `_line` (its words: env, program, arguments) and `_notes`
    (one per argument kept but not planned, and each reading worth saying), read by the flags
    of release `version` (default: the newest)."""
    env_words, program, words = split_command(engine, argv)
    if not program and not words:
        raise ImportProblem(f"the line holds only environment assignments "
                            f"({' '.join(w.partition('=')[0] for w in env_words)}): there is no "
                            f"launch command in it; expected `{convention(engine).launch.program} "
                            "...` after them")
    line_env = dict(w.partition("=")[::2] for w in env_words)
    env = {**env, **line_env}
    conv = convention(engine, version)
    table = conv.flag_table()
    notes: list[str] = []
    shell_words(conv, table, words, notes)
    try:
        args, values = read_words(table, words)
        if values.get("config"):  # both engines: the file's keys first, the line overrides them
            _, values = read_words(table, config_words(cast(str, values["config"]), notes) + words)
        check_json_keys(table, values)
    except FlagProblem as exc:
        raise FlagRefused(str(exc)) from None
    _accepted_values(conv, values)
    written = {a.dest: a.text for a in args if a.flag is not None}  # notes quote the user's words
    out = READERS[conv]({**values, "_written": written, "_conv": conv}, env, notes)
    out["_version"] = conv.version
    out["disaggregation"] = _disaggregation(conv, table, values)
    implied = conv.launch.disaggregation.implied_device(out["disaggregation"])
    if implied is not None and values.get("device") is None:
        out["topology"]["device"] = implied[0]
        notes.append(f"topology.device {implied[0]}: {implied[1]}")
    elif implied is not None and values["device"] != implied[0]:
        raise ImportProblem(f"--device {values['device']}: {implied[1]}")
    partition = conv.launch.pp_partition_env
    part = env.get(partition)
    if part:
        try:
            out["model"]["pp_partition"] = [int(x) for x in part.split(",")]
        except ValueError:
            raise ImportProblem(f"{partition}={part!r} is not a "
                                "comma-separated list of layer counts") from None
    modelled = conv.launch.modelled
    kept = [a.text for a in args if a.flag is not None and a.dest not in modelled]
    notes += [f"kept, not planned: {text}" for text in kept]
    notes += [f"kept, not planned: {name}={line_env[name]}" for name in ignored_env(engine, line_env)]
    # specplan's own additions (a shell variable for a path it does not know) are not the line's
    line = [a.text for a in args if not set(a.words) & _PLACEHOLDER_WORDS]
    out["_line"] = [*env_words, *([" ".join(program)] if program else []), *line]
    out["_notes"] = notes
    return out


def _accepted_values(conv, values: dict) -> None:
    """The values the engine checks once its parser is done (LaunchTable.accepted_values)."""
    for dest, allowed in conv.launch.accepted_values.items():
        value = values.get(dest)
        if value is not None and value not in allowed:
            flag = conv.flag_table().by_dest(dest).name
            raise ImportProblem(f"{flag} {value}: {conv.title} refuses it at start-up (one of "
                                f"{', '.join(sorted(allowed))}; a platform plugin's own methods "
                                "are not modelled)")


def config_words(path: str, notes: list[str]) -> list[str]:
    """`--config FILE` (YAML key: value) as the words both engines insert before the line's
    (SGLang ConfigArgumentMerger, vLLM FlexibleArgumentParser._pull_args_from_config)."""
    data = _config_yaml(path)
    words: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if value is True:
            words.append(flag)
        elif isinstance(value, list):
            words += [flag, *map(str, value)]
        elif isinstance(value, dict):
            words += [flag, json.dumps(value, default=str)]  # a YAML date is its ISO text
        elif value is not False and value is not None:
            words += [flag, str(value)]
    notes.append(f"read {len(data)} options from --config {path}")
    return words


MAX_CONFIG_VALUES = 10_000  # values of a --config file once its aliases are expanded
_MAX_CONFIG_DEPTH = 32


def _config_yaml(path: str) -> dict:
    """A --config file as the engines read it (yaml.safe_load, YAML 1.1), bounded first: UTF-8
    text of at most 1 MiB, nested at most 32 deep and at most MAX_CONFIG_VALUES values once
    aliases are expanded (an alias bomb is a few lines), one mapping."""
    import yaml

    from specplan.errors import UserError
    from specplan.io.files import read_text

    try:
        text = read_text(path, "a YAML file of option: value")
    except UserError as exc:
        raise ImportProblem(f"cannot read --config {exc.diagnostics[0]}") from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        _bounded(node, path)
        data = loader.construct_document(node) if node is not None else {}
    except yaml.YAMLError as exc:
        raise ImportProblem(f"cannot read --config {path}: {exc}") from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ImportProblem(f"--config {path}: expected a mapping of option: value")
    return data


def _bounded(node, path: str) -> None:
    """Walk the node graph as construction would expand it, without constructing it."""
    stack, seen = [(node, 0)] if node is not None else [], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > _MAX_CONFIG_DEPTH or seen > MAX_CONFIG_VALUES:
            raise ImportProblem(f"--config {path}: expands past {MAX_CONFIG_VALUES:,} values or "
                                f"{_MAX_CONFIG_DEPTH} levels once its aliases are expanded; "
                                "expected option: value lines")
        if isinstance(item.value, list):
            children = (c for pair in item.value for c in (pair if isinstance(pair, tuple) else (pair,)))
            stack.extend((c, depth + 1) for c in children)


def _disaggregation(conv, table, values: dict) -> dict | None:
    from specplan.engines.launch import LaunchProblem

    flags = {}
    for dest, value in values.items():
        if dest in table.positional:
            continue
        flags[table.by_dest(dest).name] = json.dumps(value) if isinstance(value, dict) else value
    try:
        return conv.launch.disaggregation.read(flags)
    except LaunchProblem as exc:
        raise ImportProblem(str(exc)) from None


def ignored_env(engine: str, env: dict[str, str]) -> list[str]:
    """The engine's variables in `env` that import does not read."""
    launch = convention(engine).launch
    return sorted(k for k in env if k.startswith(launch.env_prefix) and k not in launch.env)


def model_shape(config: dict) -> dict:
    """model.{num_layers, hidden_size, vocab_size, moe, attention} from a Hugging Face
    config.json (attention mla where it has kv_lora_rank)."""
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
    if config.get("kv_lora_rank"):  # DeepSeek / Kimi MLA: one latent KV, no KV heads to split
        out["attention"] = "mla"
    return out


def find_config(model_config: str | None, model_path: str | None) -> str | None:
    """The model's config.json: `--model-config`, a local model folder's, or the local Hugging
    Face cache's for a hub id ($HF_HOME/hub/models--ORG--NAME/snapshots/*/config.json);
    never the network."""
    if model_config:
        return model_config
    if not model_path:
        return None
    local = os.path.join(model_path, "config.json")
    if os.path.isfile(local):
        return local
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub")
    folder = "models--" + model_path.strip("/").replace("/", "--")
    found = sorted(glob.glob(os.path.join(glob.escape(hub), glob.escape(folder), "snapshots", "*",
                                          "config.json")))
    return found[-1] if found else None


def own_mtp(config: dict | None) -> bool:
    """Whether the checkpoint carries its own MTP layers (DeepSeek-V3 num_nextn_predict_layers)."""
    config = (config or {}).get("text_config", config or {})
    return bool(config.get("num_nextn_predict_layers") or config.get("mtp_num_hidden_layers"))


def build(engine: str, launch: dict, base: Spec | None, shape: dict, name: str | None,
          config: dict | None = None) -> dict:
    """Spec data: the base (or the engine's own behaviour) with the launch line on top."""
    data: dict[str, Any] = spec_data(base) if base else {"behaviour": "engine"}
    data["engine"] = engine
    data.pop("engine_version", None)
    if not convention(engine, launch["_version"]).newest:  # the newest: left unwritten
        data["engine_version"] = launch["_version"]
    data["name"] = name or data.get("name") or _name(launch["model"].get("path"))
    keep = {k: v for k, v in data.get("topology", {}).items()
            if k in convention(engine).launch.unstated}
    data["topology"] = {**keep, **launch["topology"]}
    model = {k: v for k, v in data.get("model", {}).items()
             if k not in ("path", "dtype", "pp_partition")}
    data["model"] = {**model, **shape, **launch["model"]}
    if launch.get("moe") and data["model"].get("moe"):
        data["model"]["moe"] = {**data["model"]["moe"], **launch["moe"]}
    elif launch.get("moe"):
        launch["_notes"].append("the model config names no experts: the MoE flags plan nothing")
    if launch.get("runtime"):
        data["runtime"] = {**data.get("runtime", {}), **launch["runtime"]}
    _speculative(engine, data, launch, base, config)
    missing = [k for k in ("num_layers", "hidden_size", "vocab_size") if k not in data["model"]]
    if missing:
        raise ImportProblem(f"the launch line does not give the model's shape ({', '.join(missing)}): "
                            "pass --base SPEC, --model-config config.json, or a local model path")
    _sync(data, launch.get("_sync_slugs"), base)
    dis = launch.get("disaggregation")
    if dis is not None and "store" in dis:
        launch["_notes"].append(f"kv_connector {dis['store']} moves the KV through a shared store, "
                                "not from rank to rank: the instance is planned alone, the "
                                "connector kept, not planned")
    elif dis is not None and "role" not in dis and "role" not in data.get("disaggregation", {}):
        launch["_notes"].append("kv_role kv_both serves either side: imported as one instance; "
                                "its role comes from the deployment (a --base with "
                                "disaggregation.role, or the pair's deployment file)")
    elif dis:  # the peer comes from the base, else the user names it
        data["disaggregation"] = {**data.get("disaggregation", {}), **dis}
    if launch.get("_line") is not None:
        data["engine_args"] = launch["_line"]
    return data


def _speculative(engine: str, data: dict, launch: dict, base: Spec | None,
                 config: dict | None) -> None:
    """data["speculative"]: the line's method and widths (the engine's defaults for the ones it
    leaves out) over the base's keys a line cannot state."""
    spec = {k: v for k, v in data.get("speculative", {}).items()
            if k in convention(engine).launch.unstated}
    told = dict(launch["speculative"])
    if told.pop("_detect", None) is not None:  # vLLM fills it in (import_line.detect_vllm_method)
        if base is None:
            raise ImportProblem("--speculative-config names no method: pass --draft-config, or "
                                "name the method")
        told["method"] = base.speculative.method  # re-reading an imported spec's own line
    auto = told.pop("_auto", None)
    if auto is not None and auto.get("vllm_method") is None and "vllm_method" in auto:
        auto["vllm_method"] = told["method"]
    if auto is not None:
        told.update(_engine_widths(auto, told["method"], base, config, launch["_notes"],
                                   launch["_version"]))
    named = METHODS.get(told.get("method", ""))
    if named and named.without_draft and "draft_path" not in told and own_mtp(config):
        # SGLang runs EAGLE on the checkpoint's own MTP layers: NEXTN (Method.without_draft)
        told["method"] = named.without_draft
        launch["_notes"].append(f"{named.title} without a draft model on a checkpoint with its "
                                f"own MTP layers (num_nextn_predict_layers) is "
                                f"{METHODS[named.without_draft].title}")
    if told:
        data["speculative"] = {**spec, **told}
    else:
        data.pop("speculative", None)


def _engine_widths(auto: dict, method: str, base: Spec | None, config: dict | None,
                   notes: list[str], version: str | None = None) -> dict:
    """The widths the line leaves to the engine: the base spec's (same method), else the
    engine's own default for the model (engines/sglang/defaults.py, engines/vllm/methods.py),
    of the release `version` the line is read as, said in a note."""
    from specplan.engines.base import NoDefault
    from specplan.engines.sglang import defaults as sglang
    from specplan.engines.vllm import methods as vllm

    if base is not None and base.speculative.method == method:
        s = base.speculative
        return {"num_steps": s.num_steps, **({"topk": s.topk} if s.topk > 1 else {}),
                **({"num_draft_tokens": s.num_draft_tokens} if s.num_draft_tokens else {})}
    try:
        if "vllm_method" in auto:
            steps, why = vllm.vllm_tokens(auto["vllm_method"], config)
            notes.append(f"num_steps {steps}: {why}")
            return {"num_steps": steps}
        if auto["trie"]:  # SGLang's NGRAM: its widths from the trie's breadth
            (steps, topk, width), why = sglang.sglang_ngram(auto["breadth"], auto["draft_tokens"],
                                                            version)
        else:
            arch = ((config or {}).get("architectures") or [None])[0]
            (steps, topk, width), why = sglang.sglang_eagle(auto["algorithm"], arch, auto["topk"],
                                                       auto["draft_tokens"], version)
    except NoDefault as exc:
        raise ImportProblem(str(exc)) from None
    notes.append(f"num_steps {steps}, topk {topk}, num_draft_tokens {width}: {why}")
    return {"num_steps": steps, **({"topk": topk} if topk > 1 else {}),
            **({"num_draft_tokens": width} if width != steps + 1 else {})}


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

    sites = given(plan(reload(data)).draft.sites)  # a whole plan's draft: every pass ran
    states = {n: given(e.converge) for n, e in sites.items()}
    care = spec_tp_sync.slugs_of(states, only_on=False)
    return spec_tp_sync.slugs_of(states) == slugs & care

