"""What `specplan import` reads beside the launch line: the release whose flags accept it, the
model's config.json and the draft's EAGLE3 taps (the command itself: commands/import_.py)."""

from __future__ import annotations

import json

from specplan.ecosystem.launch_import import FlagRefused, ImportProblem, find_config, read_launch
from specplan.errors import UserError
from specplan.io.files import read_text


def draft_taps(engine: str, data: dict, draft_config: str | None, launch: dict) -> None:
    """vLLM's EAGLE3 taps come from the draft's config (`eagle_aux_hidden_state_layer_ids`, used
    as tap ids as they are), which the engine's start-up check compares with the plan's."""
    spec = data.get("speculative") or {}
    from specplan.engines import convention

    if spec.get("method") not in convention(engine).taps_from_draft_config:
        return
    path = find_config(draft_config, spec.get("draft_path"))
    draft = read_config(path) or {}
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


def detect_vllm_method(launch: dict, draft_config: str | None, target: dict | None = None) -> None:
    """A vLLM --speculative-config without `method`: the method vLLM fills in (from the draft's
    name, then its config.json; engines/vllm/methods.py vllm_method), said in a note. A line
    written for an older release whose own code took a draft-less config on some targets as
    MTP with the target as the draft (engines/vllm/methods.py older_mtp): `mtp`, which the
    supported releases need spelt out, so the modern export carries it. `target`: the model's
    config.json, when at hand."""
    from specplan.ecosystem.launch_read import vllm_method_of
    from specplan.engines.base import NoDefault
    from specplan.engines.vllm.methods import older_mtp, vllm_method

    spec = launch.get("speculative") or {}
    detect = spec.pop("_detect", None)
    if detect is None:
        return
    model = detect["model"]
    older = older_mtp(launch.get("_written_for"), target) if model is None else None
    if older is not None:
        name, why = older
        spec["method"] = vllm_method_of(name)
        if "_auto" in spec:
            spec["_auto"]["vllm_method"] = spec["method"]
        launch["_notes"].append(f"speculative.method {spec['method']} (vLLM's {name}): {why}")
        if launch.get("_line") is not None:  # the modern line says it, as its releases need
            launch["_line"] = [_with_method(text, name) for text in launch["_line"]]
        return
    path = find_config(draft_config, model if isinstance(model, str) else None)
    try:
        name, why = vllm_method(model, read_config(path) if path else None)
    except NoDefault as exc:
        raise ImportProblem(str(exc)) from None
    spec["method"] = vllm_method_of(name)
    if "_auto" in spec:
        spec["_auto"]["vllm_method"] = spec["method"]
    launch["_notes"].append(f"speculative.method {spec['method']} (vLLM's {name}): the line names "
                            f"no method and vLLM fills it in: {why}")


def _with_method(text: str, method: str) -> str:
    """One argument of the kept line (its shell text): a --speculative-config with `method`
    put first (its own keys kept, in their order); any other argument as it is."""
    import shlex

    from specplan.ecosystem.retired import quoted

    words = shlex.split(text)
    name, eq, inline = words[0].partition("=") if words else ("", "", "")
    if name.replace("_", "-") != "--speculative-config" or (not eq and len(words) != 2):
        return text
    own = json.loads(inline if eq else words[1])
    value = json.dumps({"method": method, **own})
    return f"{name}={shlex.quote(value)}" if eq else quoted([name, value])


def pick_release(engine: str, env: dict[str, str], argv: list[str], strict: bool = False) -> dict:
    """read_launch by the newest release whose flags accept the whole line; the note says
    which (and why not a newer one). A line no supported release accepts, written for an older
    one, is read in the supported spelling (ecosystem/retired.py: flags; ecosystem/
    retired_values.py: KV connector names, and a note where a connector name meant another
    connector then), one note per retired spelling; `strict`: refused as
    the supported releases refuse it."""
    from specplan.ecosystem.retired_values import (modern_connectors, retired_keys_said,
                                                   reused_connectors_said)

    notes: list[str] = []
    older: str | None = None
    if not strict:
        argv, notes, older = modern_connectors(engine, argv)
    try:
        launch = _pick_release(engine, env, argv)
    except FlagRefused as exc:
        if strict:
            raise ImportProblem(f"{exc} (--strict: spellings of releases before the supported "
                                "ones are refused)") from None
        from specplan.ecosystem.launch_import import split_command
        from specplan.ecosystem.retired import modernise

        env_words, program, words = split_command(engine, argv)
        by_code: dict[str, list[str]] = {}
        modern, flags, by_flags = modernise(engine, words, by_code)
        if not flags:
            said = retired_keys_said(engine, words)
            if said:
                raise FlagRefused(f"{exc} ({said})") from None
            raise
        launch = _pick_release(engine, env, [*env_words, *program, *modern])
        notes, older = [*notes, *flags], _older(by_flags, older)
        launch["_moved_by_code"] = by_code
    notes += reused_connectors_said(engine, argv, older)
    if notes:
        launch["_notes"][:0] = notes
        launch["_written_for"] = older
    return launch


def carry_config_fields(launch: dict, config: dict | None) -> None:
    """A retired flag moved into a key of a JSON flag as its last release did it (vLLM 0.11.0:
    --rope-scaling into hf_overrides' rope_scaling) where the supported releases replace more
    with that key than the old one did (engines/vllm/launch.py HF_OVERRIDE_REPLACES: the
    checkpoint's rope_theta too): the model's own values of those fields put in the object, so
    the modern line keeps them, one note; none at hand: a note saying what the key replaces."""
    import shlex

    from specplan.ecosystem.retired import quoted
    from specplan.engines.vllm.launch import HF_OVERRIDE_REPLACES, HF_OVERRIDE_WHY

    text = (config or {}).get("text_config", config or {})
    own = {**(text.get("rope_parameters") or {}), **text} if isinstance(text, dict) else {}
    for flag, keys in launch.pop("_moved_by_code", {}).items():
        for key in (k for k in keys if k in HF_OVERRIDE_REPLACES):
            found = {f: own[f] for f in HF_OVERRIDE_REPLACES[key] if f in own}
            lines = launch.get("_line") or []
            for i, arg in enumerate(lines):
                words = shlex.split(arg)
                value = json.loads(words[1]) if len(words) == 2 and words[0] == flag else None
                if found and isinstance(value, dict) and isinstance(value.get(key), dict):
                    value[key] = {**found, **value[key]}
                    lines[i] = quoted([flag, json.dumps(value)])
            if found:
                given = ", ".join(f"{f} {v}" for f, v in found.items())
                launch["_notes"].append(f"{flag} {key}: {given} from the model's config.json put "
                                        f"in it: {HF_OVERRIDE_WHY}")
            else:
                fields = " or ".join(HF_OVERRIDE_REPLACES[key])
                launch["_notes"].append(f"{flag} {key}: no {fields} in the model's config at hand "
                                        f"to keep: {HF_OVERRIDE_WHY}; the model's default applies")


def _older(*releases: str | None) -> str | None:
    """The oldest of the releases given (a line written for both is for the older)."""
    from specplan.engines.releases import version_key

    given = [r for r in releases if r]
    return min(given, key=version_key) if given else None


def _pick_release(engine: str, env: dict[str, str], argv: list[str]) -> dict:
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
    raise FlagRefused(f"{refused[0][1]} (no supported release accepts the line: "
                        f"{refused[-1][0]} to {refused[0][0]}"
                        + "".join(f"; {o}" for o in others) + ")")


def read_config(path: str | None) -> dict | None:
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
