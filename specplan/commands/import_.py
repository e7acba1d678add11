"""`specplan import`: gather the launch line, the base spec and the model shape; write YAML.

ecosystem/ reads the line (launch_import.py, import_line.py); this module loads the base spec,
writes the YAML, prints and returns the exit code."""

from __future__ import annotations

from dataclasses import dataclass

from specplan.commands.common import Said, check_release
from specplan.commands.fit import echo, echo_yaml
from specplan.errors import EXIT_BAD_INPUT, EXIT_OK


Line = tuple[dict[str, str], list[str], bool]  # (the SGLANG_* / VLLM_* env, the argv, own form)


@dataclass(frozen=True)
class LineOptions:
    """How import reads the line beside its release: `strict` refuses spellings of releases
    before the supported ones; `variables` (NAME=VALUE) and `use_env` (the calling
    environment) give the shell variables the script does not assign."""

    strict: bool = False
    variables: tuple[str, ...] = ()
    use_env: bool = False


def run(engine: str, line: list[str], environ: dict[str, str], script: str | None,
        base: str | None, model_config: str | None, name: str | None, out: str | None,
        draft_config: str | None, version: str | None, options: LineOptions | None = None) -> int:
    """Messages on stderr, the YAML on stdout (or in `out`); the exit code."""
    said = imported(engine, line, environ, script, base, model_config, name, out, draft_config,
                    version, options)
    for message in said.messages:
        echo(message, err=True)
    if said.text:
        echo_yaml(said.text)
    return said.code


def imported(engine: str, line: list[str], environ: dict[str, str], script: str | None,
             base_path: str | None, model_config: str | None, name: str | None,
             out: str | None, draft_config: str | None = None,
             version: str | None = None,
             options: LineOptions | None = None) -> Said:
    """Import for the CLI and the API alike: (exit code, YAML for stdout, messages for stderr)
    (`out`: the YAML written there instead). `draft_config`: the draft's config.json
    (else found beside a local draft path or in the Hugging Face cache, as the target's).
    `version`: the release whose flags read the line; None: the base spec's engine_version, else
    the newest release whose parser accepts every word of it."""
    from specplan.ecosystem.import_line import (carry_config_fields, detect_vllm_method,
                                                draft_taps, pick_release, read_config)
    from specplan.ecosystem.launch_import import (ImportProblem, build, find_config, ignored_env,
                                                  model_shape, read_launch)
    from specplan.ecosystem.yaml_out import reload, to_yaml
    from specplan.errors import UserError
    from specplan.io.files import write_atomic
    from specplan.schema import load_spec

    check_release(engine, version)
    found = _line(line, environ, script, options or LineOptions(), engine)
    if isinstance(found, str):
        return Said(EXIT_BAD_INPUT, "", (found,))
    env, argv, own_form = found
    base = load_spec(base_path) if base_path else None
    if version is None and base is not None and base.engine == engine:
        version = base.engine_version  # the base's release, when it names one
    try:
        strict = bool(options and options.strict)
        launch = read_launch(engine, env, argv, version) if version else \
            pick_release(engine, env, argv, strict)
        if own_form:
            launch["_line"] = None
        config = read_config(find_config(model_config, launch["model"].get("path")))
        detect_vllm_method(launch, draft_config, config)
        carry_config_fields(launch, config)
        data = build(engine, launch, base, model_shape(config) if config else {}, name, config)
        draft_taps(engine, data, draft_config, launch)
    except ImportProblem as exc:
        return Said(EXIT_BAD_INPUT, "", (f"specplan import: {exc}",))
    try:
        reload(data, "<the imported launch line>")
    except UserError as exc:
        return Said(EXIT_BAD_INPUT, "", tuple(f"specplan import: the launch line makes an invalid "
                                              f"spec: {d.path}: {d.message}" for d in exc.diagnostics))
    skipped = ignored_env(engine, env)  # from the environment or `export` lines, not the line
    notes = launch["_notes"] + ([launch["_release"]] if "_release" in launch else [])
    messages = [f"specplan import: {note}" for note in notes]
    if skipped:
        messages.append(f"specplan import: ignored {', '.join(skipped)} (no bearing on the plan)")
    text = to_yaml(data, header=f"Imported from a {engine} launch line by `specplan import`.")
    if out is None:
        return Said(EXIT_OK, text, tuple(messages))
    write_atomic(out, text, what="the spec")
    return Said(EXIT_OK, "", (*messages, f"wrote {out}"))


def _line(line: list[str], environ: dict[str, str], script: str | None, options: LineOptions,
          engine: str = "") -> Line | str:
    """(the SGLANG_* / VLLM_* environment, the argv, whether it is export's own one-flag-per-line
    form), or the message that there is no line to read. Shell variables: the script's own
    assignments, then --env NAME=VALUE, then (with --use-env) the calling environment."""
    from specplan.ecosystem.launch_import import ImportProblem, parse_script
    from specplan.ecosystem.lws_import import is_lws
    from specplan.ecosystem.nodes_import import per_node
    from specplan.ecosystem.shell import expand
    from specplan.io.files import read_text

    supplied = _supplied(environ, options)
    if isinstance(supplied, str):
        return supplied
    env = {k: v for k, v in environ.items() if k.startswith(("SGLANG_", "VLLM_"))}
    argv = [expand(w, supplied) for w in line]
    own_form = False  # specplan export's one-flag-per-line form: its spelling, not the user's
    if script:
        text = read_text(script, "a shell script holding a launch line")
        try:
            if is_lws(text) or per_node(text):  # one line per node, or a LeaderWorkerSet
                return _nodes(engine, text, script, env, argv)
            script_env, script_argv = parse_script(text, supplied)
        except ImportProblem as exc:
            return f"specplan import: {script}: {exc}"
        env, argv = {**env, **script_env}, script_argv + argv
        own_form = '"${args[@]}"' in text
    if not argv:
        return "specplan import: no launch line: give it after `--` or with --file"
    return env, argv, own_form


def _supplied(environ: dict[str, str], options: LineOptions) -> dict[str, str] | str:
    """The shell variables import is given (--env, and the environment with --use-env), or
    the message that an --env value is no NAME=VALUE."""
    supplied = dict(environ) if options.use_env else {}
    for pair in options.variables:
        name, eq, value = pair.partition("=")
        if not eq or not name.isidentifier():
            return f"specplan import: --env {pair}: expected NAME=VALUE"
        supplied[name] = value
    return supplied


def _nodes(engine: str, text: str, script: str, env: dict[str, str], argv: list[str]) -> Line | str:
    """(env, argv, own form) of per-node lines or a LeaderWorkerSet: the head's line once they
    agree (nodes_import.py, lws_import.py), or the message naming the line (the template) and
    the field where they do not."""
    from specplan.ecosystem.launch_import import ImportProblem
    from specplan.ecosystem.lws_import import is_lws, read_lws
    from specplan.ecosystem.nodes import MARK
    from specplan.ecosystem.nodes_import import read_nodes

    if argv:
        return f"specplan import: {script} holds one line per node; give no line after `--`"
    try:
        if is_lws(text):
            head_env, head_argv, _ = read_lws(engine, text, script)
        else:
            head_env, head_argv, _ = read_nodes(engine, text, script, env=env)
    except ImportProblem as exc:
        return f"specplan import: {exc}"
    own = {k: v for k, v in head_env.items() if k.startswith(("SGLANG_", "VLLM_"))}
    return own, head_argv, text.startswith(MARK)
