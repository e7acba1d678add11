"""`specplan import`: gather the launch line, the base spec and the model shape; write YAML."""

from __future__ import annotations

import json

from specplan.ecosystem.launch_import import (FlagRefused, ImportProblem, build, find_config,
                                              ignored_env, model_shape, parse_script, read_launch)
from specplan.ecosystem.yaml_out import reload, to_yaml
from specplan.errors import UserError
from specplan.files import read_text, write_atomic

EXIT_BAD_INPUT = 2


def run_import(engine: str, line: list[str], environ: dict[str, str], script: str | None,
               base_path: str | None, model_config: str | None, name: str | None,
               out: str | None, draft_config: str | None = None,
               version: str | None = None) -> tuple[int, str, list[str]]:
    """(exit code, YAML for stdout, messages for stderr). `draft_config`: the draft's config.json
    (else found beside a local draft path or in the Hugging Face cache, as the target's).
    `version`: the release whose flags read the line; None: the base spec's engine_version, else
    the newest release whose parser accepts every word of it."""
    from specplan.schema import load_spec

    prefix = ("SGLANG_", "VLLM_")
    env = {k: v for k, v in environ.items() if k.startswith(prefix)}
    argv = list(line)
    own_form = False  # specplan export's one-flag-per-line form: its spelling, not the user's
    if script:
        text = read_text(script, "a shell script holding a launch line")
        try:
            script_env, script_argv = parse_script(text)
        except ImportProblem as exc:
            return EXIT_BAD_INPUT, "", [f"specplan import: {script}: {exc}"]
        env, argv = {**env, **script_env}, script_argv + argv
        own_form = '"${args[@]}"' in text
    if not argv:
        return EXIT_BAD_INPUT, "", ["specplan import: no launch line: give it after `--` or "
                                    "with --file"]
    base = load_spec(base_path) if base_path else None
    if version is None and base is not None and base.engine == engine:
        version = base.engine_version  # the base's release, when it names one
    try:
        launch = read_launch(engine, env, argv, version) if version else pick_release(engine, env, argv)
        if own_form:
            launch["_line"] = None
        config = _config(find_config(model_config, launch["model"].get("path")))
        data = build(engine, launch, base, model_shape(config) if config else {}, name, config)
        _draft_taps(engine, data, draft_config, launch)
    except ImportProblem as exc:
        return EXIT_BAD_INPUT, "", [f"specplan import: {exc}"]
    try:
        reload(data, "<the imported launch line>")
    except UserError as exc:
        return EXIT_BAD_INPUT, "", [f"specplan import: the launch line makes an invalid spec: "
                                    f"{d.path}: {d.message}" for d in exc.diagnostics]
    skipped = ignored_env(engine, env)  # from the environment or `export` lines, not the line
    notes = launch["_notes"] + ([launch["_release"]] if "_release" in launch else [])
    messages = [f"specplan import: {note}" for note in notes]
    if skipped:
        messages.append(f"specplan import: ignored {', '.join(skipped)} (no bearing on the plan)")
    text = to_yaml(data, header=f"Imported from a {engine} launch line by `specplan import`.")
    if out is None:
        return 0, text, messages
    write_atomic(out, text, what="the spec")
    return 0, "", messages + [f"wrote {out}"]


def _draft_taps(engine: str, data: dict, draft_config: str | None, launch: dict) -> None:
    """vLLM's EAGLE3 taps come from the draft's config (`eagle_aux_hidden_state_layer_ids`, used
    as tap ids as they are), which the engine's start-up check compares with the plan's."""
    spec = data.get("speculative") or {}
    from specplan.engines import convention

    if spec.get("method") not in convention(engine).taps_from_draft_config:
        return
    path = find_config(draft_config, spec.get("draft_path"))
    draft = _config(path) or {}
    ids = draft.get("eagle_aux_hidden_state_layer_ids") or \
        (draft.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids")
    if not ids:
        return
    if not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
        raise ImportProblem(f"the draft config {path}: eagle_aux_hidden_state_layer_ids must be a "
                            f"list of layer ids, found {ids!r}")
    spec["aux_layers"] = sorted(ids)
    launch["_notes"].append(f"speculative.aux_layers {sorted(ids)} from the draft's "
                            f"eagle_aux_hidden_state_layer_ids ({path})")


def pick_release(engine: str, env: dict[str, str], argv: list[str]) -> dict:
    """read_launch by the newest release whose flags accept the whole line; the note says
    which (and why not a newer one)."""
    from specplan.engines import convention
    from specplan.engines.releases import newest_first

    refused: list[tuple[str, str]] = []  # (release, argparse's message), newest first
    for version in newest_first(engine):
        title = convention(engine, version).title
        try:
            launch = read_launch(engine, env, argv, version)
        except FlagRefused as exc:
            refused.append((title, str(exc)))
            continue
        why = f" ({'; '.join(f'{t}: {m}' for t, m in refused)})" if refused else ""
        launch["_release"] = (f"read as {title}, the newest supported release whose flags "
                              f"accept every flag of the line{why}")
        return launch
    others = [f"{t}: {m}" for t, m in refused[1:] if m != refused[0][1]]
    raise ImportProblem(f"{refused[0][1]} (no supported release accepts the line: "
                        f"{refused[-1][0]} to {refused[0][0]}"
                        + "".join(f"; {o}" for o in others) + ")")


def _config(path: str | None) -> dict | None:
    if path is None:
        return None
    try:
        data = json.loads(read_text(path, "a model's config.json"))
    except UserError as exc:
        raise ImportProblem(f"cannot read the model config {exc.diagnostics[0]}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ImportProblem(f"cannot read the model config {path}: {exc}") from None
    text_config = data.get("text_config", data) if isinstance(data, dict) else None
    if not isinstance(text_config, dict):
        what = "its text_config is" if isinstance(data, dict) else "it is"
        raise ImportProblem(f"the model config {path}: {what} not a JSON object; expected a "
                            "Hugging Face config.json")
    return data
