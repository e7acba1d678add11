"""A spec -> the engine command line and environment that run it, one flag per line.

The output is a bash script: `export VAR=value  # why` lines, an `args=( ... )` array with
one flag and a comment per line, and the launch command. Comments name the spec key each
flag carries; notes say where the engine will not do what the plan says (a site the plan
converges that the engine cannot) or where a translated layout differs.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import cast
from dataclasses import dataclass, field

from specplan.ecosystem.faithful import dp_attention_note, plan_comment, render_faithful, restated
from specplan.ecosystem.flags import DRAFT_PLACEHOLDER, DTYPES, FP8_QUANTIZATION, MODEL_PLACEHOLDER
from specplan.ecosystem.shell import split_words
from specplan.ecosystem.translate import Refusal, refusal, translate
from specplan.engines.base import PerEngine
from specplan.engines.sglang import spec_tp_sync
from specplan.engines.sglang.convention import SGLang, accept_broadcast
from specplan.engines.sglang.spec_tp_sync import SITE_SLUGS
from specplan.engines.vllm.convention import VLLM
from specplan.methods import get_method
from specplan.plan import given
from specplan.schema import Spec

# each engine's launch line, written by its flags (engines/<engine>/launch.py)
WRITERS: PerEngine[Callable[[Spec, dict, "Launch"], None]] = PerEngine("launch-line writer")


@dataclass
class Launch:
    engine: str
    title: str
    env: list[tuple[str, str, str]] = field(default_factory=list)  # (name, value, comment)
    args: list[tuple[str, str | None, str]] = field(default_factory=list)  # (flag, value, comment)
    notes: list[str] = field(default_factory=list)
    faithful: Spec | None = None  # an imported spec whose own line is printed back as written
    plan_path: str | None = None  # SPECPLAN_PLAN: the plan the specplan plugin runs
    plan_how: str = ""  # the command that writes it
    program: str = ""  # the command before the arguments (LaunchTable.program_on the device)

    def command_prefix(self) -> str:
        return f"SPECPLAN_PLAN={shlex.quote(self.plan_path)} " if self.plan_path else ""


def export(spec: Spec, engine: str | None = None, version: str | None = None,
           plan_path: str | None = None) -> Launch:
    """The launch of `spec` on `engine` (default its own) at release `version` (default the
    spec's engine_version, or the other engine's newest); Refusal when it cannot run. A
    `behaviour: specplan` spec on its own engine runs with the specplan plugin: the line sets
    SPECPLAN_PLAN to `plan_path` (default compile's build/<name>/plan.json)."""
    from specplan.engines import convention
    from specplan.engines.spelling import Unspellable, respell

    if engine is None:  # its own engine, at its own release unless another is named
        version = version or spec.engine_version
    engine = engine or spec.engine
    name = convention(engine, version).title
    try:
        target, notes = translate(spec, engine)
        target = _at_release(target, version)
    except Refusal as exc:
        raise Refusal(f"{name} cannot run {spec.name}: {exc}") from None
    why = refusal(target)
    if why:
        raise Refusal(f"{name} cannot run {spec.name}: {why}")
    from specplan.passes import plan

    sites = given(plan(target).draft.sites)  # a whole plan's draft: every pass ran
    title = f"{spec.name} on {convention(engine, target.engine_version).title}"
    if target.engine != spec.engine:
        title += f" (translated from engine {spec.engine}; layouts differ where noted)"
    table = convention(engine).launch
    launch = Launch(engine, title, notes=notes, program=table.program_on(spec.topology.device))
    if launch.program != table.program:
        launch.notes.append(table.cpu_note)
    if spec.behaviour == "specplan" and engine == spec.engine:
        launch.plan_path = plan_path or f"build/{spec.name}/plan.json"
        where = shlex.quote(str(Path(launch.plan_path).parent))
        launch.plan_how = f"specplan compile {shlex.quote(spec.line_of()[0])} -o {where}"
    WRITERS[convention(engine)](target, sites, launch)
    try:
        launch.args = respell(launch.args, convention(engine, target.engine_version).flag_table())
    except Unspellable as exc:
        raise Refusal(f"{name} cannot run {spec.name}: {exc}") from None
    if spec.disaggregation is not None:
        dis, conv = spec.disaggregation, convention(engine)
        launch.args += conv.launch.disaggregation.write(dis.role, dis.connector or conv.default_connector)
    _engine_args(spec, target, launch)
    return launch


def _at_release(spec: Spec, version: str | None) -> Spec:
    """`spec` at release `version` (its own when None): the release's rules re-checked."""
    from specplan.ecosystem.yaml_out import reload, spec_data
    from specplan.engines import convention
    from specplan.errors import UserError

    if version is None or convention(spec.engine, version) is convention(spec.engine, spec.engine_version):
        return spec
    data = {**spec_data(spec), "engine_version": version}
    try:
        return reload(data, f"{spec.line_of()[0]} (at {convention(spec.engine, version).title})")
    except UserError as exc:
        raise Refusal("; ".join(d.message for d in exc.diagnostics)) from None


def _engine_args(spec: Spec, target: Spec, launch: Launch) -> None:
    """An imported spec: its own line back (faithful), else the arguments it keeps."""
    if not spec.engine_args:
        return
    kept = _kept(spec)
    if target is not spec:
        from specplan.engines import convention

        conv = convention(launch.engine, target.engine_version)
        same = [a for a in kept if _reads(conv, a)]
        launch.args += [(a, None, "kept from engine_args: the same flag there") for a in same]
        lost = [a for a in kept if a not in same]
        if target.topology.dp_lm_head != spec.topology.dp_lm_head:
            lost.append("--enable-dp-lm-head (topology.dp_lm_head)")
        if lost:
            launch.notes.append(f"no {convention(launch.engine, target.engine_version).title} "
                                "equivalent, not carried over: "
                                + ", ".join(lost))
        return
    changed = restated(spec, {name: value for name, value, _ in launch.env})
    if not changed:
        launch.faithful = spec
        launch.notes[:0] = dp_attention_note(spec)
        return
    launch.notes.append("the spec differs from the launch line it was imported from at "
                        + ", ".join(changed) + ": specplan's spelling follows, with the "
                        "arguments it does not plan kept as written")
    launch.args += [(arg, None, "kept from engine_args, not planned") for arg in kept]


def _reads(conv, arg: str) -> bool:
    """Whether the other engine reads the argument as written: its parser (flag and value) and
    the values it checks after (LaunchTable.accepted_values)."""
    from specplan.ecosystem.argv import read_words
    from specplan.engines.flag_table import FlagProblem

    try:
        _, values = read_words(conv.flag_table(), split_words(arg))
    except FlagProblem:
        return False
    return all(values.get(d) is None or values[d] in ok for d, ok in conv.launch.accepted_values.items())


# Planned flags whose value the spec keeps only in part: --quantization other than FP8 is
# weights only for the plan (launch_read._model), so the line's value is kept beside it.
_PARTLY = {"quantization": lambda value: value not in FP8_QUANTIZATION}


def _kept(spec: Spec) -> list[str]:
    """The arguments of spec.engine_args that specplan does not plan (or plans only in part,
    _PARTLY), as written."""
    from specplan.ecosystem.argv import read_words
    from specplan.ecosystem.launch_import import split_command
    from specplan.engines import of

    words = [w for arg in spec.engine_args or () for w in split_words(arg)]
    _, _, rest = split_command(spec.engine, words)
    args, _ = read_words(of(spec).flag_table(), rest)
    modelled = of(spec).launch.modelled
    return [a.text for a in args if a.flag is not None and
            (a.dest not in modelled or a.dest in _PARTLY and _PARTLY[a.dest](a.value))]


def _paths(spec: Spec, launch: Launch, model_flag: str, draft_flag: str | None) -> None:
    path = spec.model.path
    launch.args.append((model_flag, path or MODEL_PLACEHOLDER, "target checkpoint (model.path"
                        + (")" if path else f"; unset: set {MODEL_PLACEHOLDER} first)")))
    if draft_flag is None:
        return
    draft = spec.speculative.draft_path
    if draft is None and not get_method(spec.speculative.method).needs_draft_checkpoint:
        return
    launch.args.append((draft_flag, draft or DRAFT_PLACEHOLDER, "draft checkpoint "
                        "(speculative.draft_path" + (")" if draft else f"; unset: set "
                                                     f"{DRAFT_PLACEHOLDER} first)")))


def _topology(spec: Spec, launch: Launch, names: dict[str, str]) -> None:
    t, add = spec.topology, launch.args.append
    add((names["tp"], str(t.tp), "tensor parallel size of one stage (topology.tp)"))
    for key, what in (("pp", "pipeline stages"), ("dp", "data-parallel replicas"),
                      ("cp", "context parallel"), ("dcp", "decode context parallel inside "
                      "the attention TP group"), ("ep", "expert parallel"),
                      ("moe_dp", "MoE data parallel inside the TP block")):
        value = getattr(t, key)
        if value > 1 and key in names:
            add((names[key], str(value), f"{what} (topology.{key})"))
    if t.nodes > 1:
        add(("--nnodes", str(t.nodes), "machines (topology.nodes); each node also needs "
             "its node rank and the head address"))
    if spec.model.page_size is not None:
        add((names["page"], str(spec.model.page_size), "tokens per KV page (model.page_size)"))
    dtype = spec.model.dtype
    if dtype in DTYPES:
        add(("--dtype", DTYPES[dtype], f"activation dtype (model.dtype: {dtype})"))
    else:
        launch.notes.append(f"model.dtype {dtype} has no --dtype spelling; pick the "
                            "quantization flags yourself")


@WRITERS.of(SGLang)
def _sglang(spec: Spec, sites: dict, launch: Launch) -> None:
    t = spec.topology
    _paths(spec, launch, "--model-path", "--speculative-draft-model-path")
    names = {"tp": "--tp-size", "pp": "--pp-size", "cp": "--attn-cp-size", "dcp": "--dcp-size",
             "ep": "--ep-size", "moe_dp": "--moe-dp-size", "page": "--page-size"}
    if not t.dp_attention:
        names["dp"] = "--dp-size"
    _topology(spec, launch, names)
    if t.dp_attention:
        attn_tp = t.tp // t.dp // t.cp
        at = [a[0] for a in launch.args].index("--tp-size") + 1
        launch.args.insert(at, ("--attn-dp-size", str(t.dp), f"DP-attention: attn_dp {t.dp} x "
                               f"attn_tp {attn_tp} inside the TP block (topology.dp, "
                               f"dp_attention; was --dp-size {t.dp} --enable-dp-attention)"))
    if t.pp > 1:
        launch.args.append(("--disable-overlap-schedule", None, "pipeline parallel requires "
                            "the overlap scheduler off"))
    if t.device in ("npu", "cpu"):
        launch.args.append(("--device", t.device, "accelerator (topology.device)"))
    if t.dp_lm_head:
        launch.args.append(("--enable-dp-lm-head", None, "LM head vocab-parallel over attn_tp "
                            "(topology.dp_lm_head)"))
    _extras(spec, launch, "--moe-a2a-backend", "deepep")
    if spec.runtime.async_scheduling is False and t.pp == 1:
        launch.args.append(("--disable-overlap-schedule", None, "round r's decisions are read "
                            "before round r + 1 is scheduled (runtime.async_scheduling: false)"))
    if "max_batch" in spec.runtime.model_fields_set:
        launch.args.append(("--cuda-graph-max-bs-decode", str(spec.runtime.max_batch),
                            "decode capacity (runtime.max_batch)"))
    _sglang_method(spec, launch)
    _sglang_env(spec, sites, launch)


def _sglang_method(spec: Spec, launch: Launch) -> None:
    s, add, m = spec.speculative, launch.args.append, SGLang.methods.method(spec.speculative.method)
    if not m.speculates:
        return
    add(("--speculative-algorithm", SGLang.methods[s.method].name,
         f"speculative method (speculative.method: {s.method})"))
    if m.round == "block":  # SGLang names each block method's width flag after the method
        add((f"--speculative-{s.method}-block-size", str(m.block_size(s.num_steps)),
             _block_why(m, s.num_steps)))
    else:
        add(("--speculative-num-steps", str(s.num_steps), "draft steps (speculative.num_steps)"))
        add(_sglang_topk(m, s.topk))
        add(("--speculative-num-draft-tokens", str(s.verify_width),
             "verify width, root included (speculative.num_draft_tokens)"))
    if s.draft_tp is not None:
        launch.notes.append(f"SGLang has no draft TP option: the drafter runs at the attention "
                            f"TP width, not speculative.draft_tp={s.draft_tp}")
    # Move the draft path (added by _paths right after the model path) to the method block.
    draft = [a for a in launch.args if a[0] == "--speculative-draft-model-path"]
    launch.args[:] = [a for a in launch.args if a[0] != "--speculative-draft-model-path"] + draft


def _sglang_topk(m, topk: int) -> tuple[str, str, str]:
    """SGLang's NGRAM (a trie) takes topk from its BFS breadth and ignores
    --speculative-eagle-topk (_handle_ngram)."""
    if m.trie:
        return ("--speculative-ngram-max-bfs-breadth", str(topk),
                "children per trie node, SGLang's NGRAM topk (speculative.topk)")
    return ("--speculative-eagle-topk", str(topk), "draft tree branching (speculative.topk)")


def _block_why(m, steps: int) -> str:
    if m.draft_root:
        return f"{m.title} block size = speculative.num_steps + 1"
    return f"{m.title} gamma: {steps} drafts, verify window {steps + 1} (speculative.num_steps)"


def _sglang_env(spec: Spec, sites: dict, launch: Launch) -> None:
    from specplan.engines import convention

    t, m = spec.topology, get_method(spec.speculative.method)
    if spec_tp_sync.has_sites(m):
        states = {name: e.converge for name, e in sites.items()}
        on, care = spec_tp_sync.slugs_of(states), spec_tp_sync.slugs_of(states, only_on=False)
        value = spec_tp_sync.value_for(care, on)
        launch.env.append(("SGLANG_SPEC_TP_SYNC", value, "SpecTpSync sites the plan converges: "
                           + (", ".join(sorted(on)) or "none")))
    # A PD prefill instance runs the prefill relay without it: SGLang asserts the gated relay
    # "is not compatible with --disaggregation-mode" (check_pipeline_parallel_compat).
    if t.pp > 1 and m.speculates and SGLang.methods[m.name].pp == "gated" and \
            spec.disaggregation is None and \
            cast(SGLang, convention(spec.engine, spec.engine_version)).pp_spec:
        launch.env.append(("SGLANG_ENABLE_PP_SPEC", "1", "EAGLE decode rounds under pipeline "
                           "parallel (the gated last-stage relay)"))
    if spec.model.pp_partition and t.pp > 1:
        launch.env.append(("SGLANG_PP_LAYER_PARTITION", ",".join(map(str, spec.model.pp_partition)),
                           "layers per pipeline stage (model.pp_partition)"))
    launch.notes.extend(_sglang_mismatch(spec, sites, bool(launch.plan_path)))


def _sglang_converges(spec: Spec, site: str) -> bool | None:
    """Whether SGLang can converge `site` at all: None when an env site decides it."""
    if site in SITE_SLUGS:
        return None
    row = SGLang.methods[spec.speculative.method]
    if site in row.always_sites:
        return True
    return site in row.default_sites and accept_broadcast(spec.topology.device,
                                                          spec.speculative.sampling)


def _unmatched(plugin: bool) -> str:
    """What follows from a site the plan converges and the engine cannot."""
    if plugin:
        return "the specplan plugin the line loads (SPECPLAN_PLAN) converges them (docs/engines.md)"
    return ("the engine will not match the plan there unless it loads the specplan plugin "
            "(SPECPLAN_PLAN=plan.json; docs/engines.md)")


def _sglang_mismatch(spec: Spec, sites: dict, plugin: bool = False) -> list[str]:
    lacking, extra = [], []
    for name, e in sites.items():
        engine = _sglang_converges(spec, name)
        if engine is None or e.trivial:
            continue
        if e.converge and not engine:
            lacking.append(name)
        elif engine and not e.converge:
            extra.append(name)
    notes = []
    t = spec.topology
    if t.tp // (t.dp if t.dp_attention else 1) == 1:
        lacking = extra = []  # one rank per stage: SGLang's PP relay carries the decisions
    m = get_method(spec.speculative.method)
    if m.speculates and not spec_tp_sync.has_sites(m):
        notes.append("SGLang has no SGLANG_SPEC_TP_SYNC sites for this method: eagle_sample "
                     "broadcasts only the accept triple, on sampling paths and ROCm greedy")
    if lacking:
        notes.append("behaviour: the plan converges " + ", ".join(lacking) + ", which SGLang "
                     "cannot converge: " + _unmatched(plugin))
    if extra:
        notes.append("behaviour: SGLang converges " + ", ".join(extra) + " where the plan does not")
    return notes


@WRITERS.of(VLLM)
def _vllm(spec: Spec, sites: dict, launch: Launch) -> None:
    t, s = spec.topology, spec.speculative
    _paths(spec, launch, "--model", None)
    names = {"tp": "--tensor-parallel-size", "pp": "--pipeline-parallel-size",
             "dp": "--data-parallel-size", "cp": "--prefill-context-parallel-size",
             "dcp": "--decode-context-parallel-size", "page": "--block-size"}
    _topology(spec, launch, names)
    if t.ep > 1:
        launch.args.append(("--enable-expert-parallel", None, f"experts over dp * pcp * tp = "
                            f"{t.ep} ranks (topology.ep)"))
    _extras(spec, launch, "--all2all-backend", "deepep_low_latency")
    if spec.runtime.async_scheduling is not None:
        on = spec.runtime.async_scheduling
        launch.args.append(("--async-scheduling" if on else "--no-async-scheduling", None,
                            f"runtime.async_scheduling: {'true' if on else 'false'}"))
    m = VLLM.methods.method(s.method)
    if m.speculates:
        config = {"method": VLLM.methods[s.method].name, "num_speculative_tokens": s.num_steps}
        if s.draft_path:
            config["model"] = s.draft_path
        elif m.needs_draft_checkpoint:
            launch.notes.append(f"speculative.draft_path is unset: add \"model\": <the {s.method} "
                                "draft checkpoint> to --speculative-config")
        if s.draft_tp is not None:
            config["draft_tensor_parallel_size"] = s.draft_tp
        launch.args.append(("--speculative-config", json.dumps(config, separators=(",", ":")),
                            "speculative.method, num_steps, draft_path, draft_tp"))
        launch.env.append(("VLLM_USE_V2_MODEL_RUNNER", "1", "the plan models Model Runner V2 "
                           "(its PP relay of sampled tokens and drafts)"))
    if spec.model.pp_partition and t.pp > 1:
        launch.env.append(("VLLM_PP_LAYER_PARTITION", ",".join(map(str, spec.model.pp_partition)),
                           "layers per pipeline stage (model.pp_partition)"))
    lacking = [n for n, e in sites.items() if e.converge and not e.trivial]
    if lacking and t.tp * t.cp > 1:
        launch.notes.append("behaviour: the plan converges " + ", ".join(lacking) + ", which "
                            "vLLM never converges inside TP (it relies on identical logits and "
                            "seeded RNG): " + (_unmatched(True) if launch.plan_path else
                                               "the engine will not match the plan there"))
    if s.sampling != "greedy":
        launch.notes.append(f"speculative.sampling {s.sampling} is chosen per request, not at launch")


def _extras(spec: Spec, launch: Launch, a2a_flag: str, deepep: str) -> None:
    """KV dtype, the MoE all-to-all backend and EPLB: the same keys on both engines."""
    m, add = spec.model, launch.args.append
    if m.kv_cache_dtype not in (None, "auto"):
        add(("--kv-cache-dtype", _KV_SPELLING.get(m.kv_cache_dtype, m.kv_cache_dtype),
             f"KV cache dtype (model.kv_cache_dtype: {m.kv_cache_dtype})"))
    if m.moe is not None and m.moe.a2a == "deepep":
        add((a2a_flag, deepep, "DeepEP dispatch (model.moe.a2a: deepep)"))
    if m.moe is not None and m.moe.eplb:
        add(("--enable-eplb", None, "experts rebalanced at the same step on every rank "
             "(model.moe.eplb)"))


_KV_SPELLING = {"bf16": "bfloat16", "fp16": "float16"}


def render(launch: Launch) -> str:
    """The bash script of a Launch."""
    if launch.faithful is not None:
        return render_faithful(launch.faithful, launch, launch.title)
    out = [f"# specplan export: {launch.title}"]
    out += [f"# note: {n}" for n in launch.notes]
    for name, value, comment in launch.env:
        out.append(f"export {name}={shlex.quote(value)}  # {comment}")
    rows = [(flag if value is None else f"{flag} {_quote(value)}", comment)
            for flag, value, comment in launch.args]
    width = max([len(r[0]) for r in rows if len(r[0]) <= 48] or [0])
    out.append("args=(")
    out += [f"  {text.ljust(width)}  # {comment}" for text, comment in rows]
    out.append(")")
    out += plan_comment(launch)
    out.append(f'{launch.command_prefix()}{launch.program} "${{args[@]}}"')
    return "\n".join(out) + "\n"


def _quote(value: str) -> str:
    """A placeholder is a shell variable the user sets, never a value printed as real."""
    if value in (MODEL_PLACEHOLDER, DRAFT_PLACEHOLDER):
        return f'"${value}"'
    return shlex.quote(value)

