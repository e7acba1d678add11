"""`specplan import`: gather the launch line, the base spec and the model shape; write YAML."""

from __future__ import annotations

import json
from pathlib import Path

from specplan.ecosystem.launch_import import (ImportProblem, build, ignored_env, model_shape,
                                              parse_script, read_launch)
from specplan.ecosystem.yaml_out import reload, to_yaml
from specplan.errors import UserError
from specplan.files import write_atomic

EXIT_BAD_INPUT = 2


def run_import(engine: str, line: list[str], environ: dict[str, str], script: str | None,
               base_path: str | None, model_config: str | None, name: str | None,
               out: str | None) -> tuple[int, str, list[str]]:
    """(exit code, YAML for stdout, messages for stderr)."""
    from specplan.schema import load_spec

    prefix = ("SGLANG_", "VLLM_")
    env = {k: v for k, v in environ.items() if k.startswith(prefix)}
    argv = list(line)
    if script:
        script_env, script_argv = parse_script(Path(script).read_text())
        env, argv = {**env, **script_env}, script_argv + argv
    if not argv:
        return EXIT_BAD_INPUT, "", ["specplan import: no launch line: give it after `--` or "
                                    "with --file"]
    base = load_spec(base_path) if base_path else None
    try:
        launch = read_launch(engine, env, argv)
        shape = _shape(model_config, launch["model"].get("path"))
        data = build(engine, launch, base, shape, name)
    except ImportProblem as exc:
        return EXIT_BAD_INPUT, "", [f"specplan import: {exc}"]
    try:
        reload(data)
    except UserError as exc:
        return EXIT_BAD_INPUT, "", [f"specplan import: the launch line makes an invalid spec: "
                                    f"{d.path}: {d.message}" for d in exc.diagnostics]
    skipped = ignored_env(engine, env)
    messages = [f"specplan import: ignored {', '.join(skipped)} (no bearing on the plan)"] if skipped else []
    text = to_yaml(data, header=f"Imported from a {engine} launch line by `specplan import`.")
    if out is None:
        return 0, text, messages
    write_atomic(out, text)
    return 0, "", messages + [f"wrote {out}"]


def _shape(model_config: str | None, model_path: str | None) -> dict:
    path = model_config
    if path is None and model_path and (Path(model_path) / "config.json").is_file():
        path = str(Path(model_path) / "config.json")
    if path is None:
        return {}
    try:
        return model_shape(json.loads(Path(path).read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ImportProblem(f"cannot read the model config {path}: {exc}") from None
