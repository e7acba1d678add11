"""Export of an imported spec to its own engine: the user's launch line, as written.

A spec holding `engine_args` (what `specplan import` read) is exported as that line, word for
word, when re-reading it gives the spec's own keys back. What the plan needs beyond the line
(an environment variable, a draft checkpoint the spec lacks) follows `# added by specplan:`
with its reason; a path specplan does not know is a shell variable (`"$DRAFT_MODEL_PATH"`),
never a placeholder printed as if it were real. When the spec has been edited since (a key
the line states differs), `None` is returned and export writes specplan's own spelling.
"""

from __future__ import annotations

import shlex

from specplan.ecosystem.flags import DRAFT_PLACEHOLDER
from specplan.ecosystem.shell import split_words
from specplan.methods import METHODS
from specplan.schema import Spec


def restated(spec: Spec, env: dict[str, str] | None = None) -> list[str] | None:
    """The keys where re-reading spec.engine_args differs from the spec ([] when none);
    None when the spec has no engine_args. `env` is what specplan's export sets
    (SGLANG_SPEC_TP_SYNC, the layer partition): keys it states are added, not changed."""
    from specplan.ecosystem.launch_import import build, read_launch
    from specplan.ecosystem.yaml_out import reload, spec_data

    if not spec.engine_args:
        return None
    words = [w for arg in spec.engine_args for w in split_words(arg)]
    launch = read_launch(spec.engine, dict(env or {}), words, spec.engine_version)
    # A method drafting with the checkpoint's own layers reads back as itself only from a
    # config that has them (ecosystem/launch_import.py own_mtp).
    hint = {"num_nextn_predict_layers": 1} if METHODS[spec.speculative.method].own_layers else None
    data = build(spec.engine, launch, spec, {}, spec.name, hint)
    got, want = spec_data(reload(data)), spec_data(spec)
    return sorted(_diff(got, want))


def _diff(got: dict, want: dict, path: str = "") -> set[str]:
    out = set()
    for key in set(got) | set(want):
        a, b = got.get(key), want.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out |= _diff(a, b, f"{path}{key}.")
        elif a != b:
            out.add(f"{path}{key}")
    return out


def render_faithful(spec: Spec, launch, title: str) -> str:
    """The user's line (spec.engine_args) with what specplan adds after `# added by specplan:`.
    `launch` is specplan's own export of the spec (its env and notes are reused)."""
    from specplan.engines import of

    unset = of(spec).launch.env_defaults  # what the engine does with the variable unset: not added
    engine_args = spec.engine_args
    assert engine_args is not None  # a faithful export is of an imported line
    line_env = {a.partition("=")[0]: a.partition("=")[2] for a in engine_args
                if "=" in a.split(" ")[0] and not a.startswith("-")}
    added_env = [(n, v, why) for n, v, why in launch.env
                 if line_env.get(n) != v and (n, v) not in unset
                 and not (n == "VLLM_USE_V2_MODEL_RUNNER" and spec.topology.pp == 1)]
    added_flags = []
    s = spec.speculative
    has_draft = any(a.split(" ")[0] == "--speculative-draft-model-path" for a in engine_args)
    if METHODS[s.method].needs_draft_checkpoint and s.draft_path is None and not has_draft:
        for flag, value, _ in launch.args:
            if value == DRAFT_PLACEHOLDER and flag.startswith("--speculative-draft"):
                added_flags.append((flag, f'"${DRAFT_PLACEHOLDER}"', f"speculative.draft_path is "
                                    f"unset: set {DRAFT_PLACEHOLDER} to the {s.method} draft checkpoint"))
    out = [f"# specplan export: {title} (the launch line as imported)"]
    out += [f"# note: {n}" for n in launch.notes]
    if added_env or added_flags:
        out.append("# added by specplan:")
        out += [f"#   {flag} {value}: {why}" for flag, value, why in added_flags]
        out += [f"export {n}={shlex.quote(v)}  # {why}" for n, v, why in added_env]
    command = launch.command_prefix() + " ".join(engine_args)
    if launch.plan_path:
        out += plan_comment(launch)
    if added_flags:
        command += " \\\n" + " \\\n".join(f"  {flag} {value}" for flag, value, _ in added_flags)
    return "\n".join(out) + "\n" + command + "\n"


def plan_comment(launch) -> list[str]:
    if not launch.plan_path:
        return []
    return [f"# SPECPLAN_PLAN: the specplan plugin runs this plan inside the engine "
            f"(`{launch.plan_how}` writes it)"]


def dp_attention_note(spec: Spec) -> list[str]:
    """The older SGLang spelling kept as written, and the one the newest release documents."""
    from specplan.ecosystem.argv import read_words
    from specplan.ecosystem.launch_import import split_command
    from specplan.engines import convention

    words = [w for arg in spec.engine_args or () for w in split_words(arg)]
    args, _ = read_words(convention(spec.engine, spec.engine_version).flag_table(), split_command(spec.engine, words)[2])
    written = {a.dest: a.text for a in args if a.flag is not None}
    if "enable_dp_attention" not in written or "dp_size" not in written:
        return []
    return [f"{written['dp_size']} {written['enable_dp_attention']} is kept as written; "
            f"{convention('sglang').title} spells it --attn-dp-size {spec.topology.dp}"]


def engine_args_problems(spec: Spec) -> list:
    """engine_args read as export reads them (shlex, the program's words, the release's parser):
    a Diagnostic naming the entry the parser refuses, [] when it reads them all. Every command
    refuses such a spec (exit 2), so check never passes what export cannot print."""
    from specplan.ecosystem.argv import read_words
    from specplan.ecosystem.launch_import import split_command
    from specplan.engines import convention
    from specplan.engines.flag_table import FlagProblem
    from specplan.errors import Diagnostic

    from specplan.ecosystem.launch_import import read_launch
    from specplan.ecosystem.launch_read import ImportProblem

    conv = convention(spec.engine, spec.engine_version)
    words: list[tuple[int, str]] = []
    try:
        for i, arg in enumerate(spec.engine_args or ()):
            words += [(i, w) for w in split_words(arg)]
        line = [w for _, w in words]
        read_words(conv.flag_table(), split_command(spec.engine, line)[2])
        if line:  # what export's re-reading (faithful.restated) raises, before it runs
            read_launch(spec.engine, {}, line, spec.engine_version)
    except (FlagProblem, ImportProblem, ValueError) as exc:
        entry = i if not isinstance(exc, (FlagProblem, ImportProblem)) else _entry_named(words, str(exc))
        path = ("engine_args",) if entry is None else ("engine_args", entry)
        file, at_line, col = spec.where(*path)
        at = "engine_args" if entry is None else f"engine_args[{entry}]"
        return [Diagnostic(file, at_line, col, at, f"{exc}: {conv.title}'s parser refuses the launch "
                           "line engine_args hold, and export prints it back as written")]
    return []


def _entry_named(words: list[tuple[int, str]], message: str) -> int | None:
    """The first entry holding a word the parser's message names (a flag, or a stray word)."""
    import re

    named = set(re.findall(r"[^\s'\",:]+", message))
    return next((i for i, w in words if w in named or w.partition("=")[0] in named), None)
