"""The engines' launch-flag tables, read from their real argparse parsers.

`sglang_parser(version)` builds the parser `python -m sglang.launch_server` parses with
(prepare_server_args: argparse.ArgumentParser + ServerArgs.add_cli_args); `vllm_parser(version)`
the one `vllm serve` parses with (FlexibleArgumentParser + make_arg_parser, wherever that
release keeps them). Each imports that release's wheel with the harness stubs (nothing the
parser calls is stubbed); no version: the newest supported release.
`table_of(parser, ...)` turns a parser into the data stored in specplan/engines/<engine>/flags/: every
option string argparse accepts (hidden negations included), grouped by action, with what a
bare flag sets. tools/engine_flags.py writes the tables; tests/engines/test_flag_tables.py
checks the stored ones against these parsers.
"""

from __future__ import annotations

import argparse
import json
import os

from wheels import VERSIONS, engine_root


# Stubbed only for the older releases tools/retired_flags.py reads: native kernels and GPU
# libraries their server_args imports at module level (none is called to build the parser).
OLDER_STUBS = ("triton", "vllm", "flashinfer", "sgl_kernel", "outlines", "decord", "torchao",
               "xformers", "cuda", "pynvml", "interegular", "lark", "modelscope", "numpy.typing")


OLDER_VLLM_STUBS = ("gguf", "setproctitle", "blake3", "mistral_common", "msgspec", "zmq",
                    "sentencepiece", "tokenizers", "ray", "lm_format_enforcer", "lmformatenforcer", "outlines",
                    "compressed_tensors", "numba", "xformers", "vllm_flash_attn", "triton", "starlette",
                    "uvicorn", "watchfiles", "prometheus_fastapi_instrumentator", "depyf",
                    "diskcache", "pyzmq", "py_cpuinfo", "gptqmodel", "cv2")


def sglang_parser(version: str | None = None, root: str | None = None) -> argparse.ArgumentParser:
    """`root`: an unpacked wheel of any release (tools/retired_flags.py reads older ones)."""
    import sglang_harness

    if root and os.environ.get("SPECPLAN_OLDER_STUBS"):  # an older release imports modules
        sglang_harness.STUBBED += OLDER_STUBS  # the supported ones no longer import at start
    sglang_harness.install(root or engine_root("sglang", version))
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    return parser


def vllm_parser(version: str | None = None, root: str | None = None) -> argparse.ArgumentParser:
    import vllm_harness

    # The parser's config defaults build a DeviceConfig, which asks the platform: a CPU here.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    if root and os.environ.get("SPECPLAN_OLDER_STUBS"):
        vllm_harness.STUBBED += OLDER_VLLM_STUBS
    vllm_harness.install(root or engine_root("vllm", version))
    if root:  # an older release finds its CPU platform by its own version string ("+cpu")
        import sys

        sys.meta_path.insert(0, vllm_harness._StubMetadata({"vllm": f"{version}+cpu"}))
    # The modules moved between releases: take the first that this release has.
    make_arg_parser = _first("make_arg_parser", "vllm.entrypoints.common.cli_args",
                             "vllm.entrypoints.launchers.cli_args",
                             "vllm.entrypoints.openai.cli_args")
    parser_class = _first("FlexibleArgumentParser", "vllm.utils.argparse_utils", "vllm.utils")
    return make_arg_parser(parser_class(prog="vllm serve"))


def _first(name: str, *modules: str):
    import importlib

    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ModuleNotFoundError as exc:  # this release has no such module; any other
            if not module.startswith(exc.name or "\0"):  # missing import is a real failure
                raise
            continue
        if found is not None:
            return found
    raise ImportError(f"{name} is in none of {modules}")


def _nargs(action: argparse.Action) -> str:
    if action.nargs is None:
        return "1"
    return str(action.nargs)


class Refused(Exception):
    """A flag whose action refuses it when given (an older release's deprecated flag)."""


def _bare_value(action: argparse.Action, option: str, parser) -> object:
    """What `option` alone sets (a flag of nargs 0), as JSON data; Refused with the message
    when the action refuses the flag (raises, or exits through parser.error)."""
    import contextlib
    import io

    namespace = argparse.Namespace()
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            action(parser, namespace, [], option)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the engine's own refusal
        message = str(exc) if not isinstance(exc, SystemExit) else said.getvalue()
        raise Refused(message.strip().splitlines()[-1] if message.strip() else option) from None
    value = getattr(namespace, action.dest, None)
    return value if isinstance(value, (bool, int, float, str, type(None))) else repr(value)


def _is_json(action: argparse.Action) -> bool:
    """Whether the flag's value is parsed as a JSON object (vLLM's config flags)."""
    if action.type is None or action.nargs == 0:
        return False
    try:
        value = action.type("{}")
    except Exception:  # noqa: BLE001 - a type that refuses "{}" takes no JSON object
        return False
    return value is not None and not isinstance(value, (str, int, float))


def _config_keys(action: argparse.Action, classes: dict) -> list[str] | None:
    """The keys a JSON flag's object may hold: the fields of the config class it validates
    against (parse_dataclass's bound class, or `classes[dest]` for a flag parsed as a plain
    dict and validated later, as vLLM's --speculative-config)."""
    import dataclasses

    cls = classes.get(action.dest)
    defaults = getattr(action.type, "__defaults__", None) or ()
    cls = cls or next((d for d in defaults if isinstance(d, type)), None)
    if cls is None or not dataclasses.is_dataclass(cls):
        return None
    return [f.name for f in dataclasses.fields(cls)]


def table_of(parser: argparse.ArgumentParser, engine: str, version: str, program: str,
             underscores: bool, json_dotted: bool, classes: dict | None = None) -> dict:
    """The flag table of `parser` as JSON-able data (see specplan/engines/flag_table.py)."""
    with_help = bool(os.environ.get("SPECPLAN_FLAG_HELP"))
    by_action: dict[int, list[str]] = {}
    actions: dict[int, argparse.Action] = {}
    for option, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), []).append(option)
        actions[id(action)] = action
    flags = []
    for key, options in by_action.items():
        action = actions[key]
        if isinstance(action, argparse._HelpAction):
            continue
        names = [o for o in action.option_strings if o in options]
        names += [o for o in options if o not in names]
        row: dict = {"names": names, "dest": action.dest, "nargs": _nargs(action)}
        if action.nargs == 0:
            try:
                row["sets"] = {o: _bare_value(action, o, parser) for o in names}
            except Refused as exc:  # the parser knows the flag only to refuse it
                row["refuses"] = str(exc)
        if action.choices is not None and all(isinstance(c, (str, int)) for c in action.choices):
            ordered = isinstance(action.choices, (list, tuple))  # a set's order varies per run
            row["choices"] = list(action.choices) if ordered else sorted(action.choices, key=str)
        if with_help and isinstance(action.help, str):  # tools/retired_flags.py: its meaning
            row["help"] = " ".join(action.help.split())
        if _is_json(action):
            row["json"] = True
            keys = _config_keys(action, classes or {})
            if keys is not None:
                row["keys"] = keys
        flags.append(row)
    positional = [a.dest for a in parser._actions if not a.option_strings]
    return {"engine": engine, "version": version, "program": program,
            "allow_abbrev": parser.allow_abbrev, "underscores": underscores,
            "json_dotted": json_dotted, "positional": positional, "flags": flags}


def table(engine: str, version: str | None = None, root: str | None = None) -> dict:
    """One release's table (each in its own process: the harnesses' stubs and the wheel on
    sys.path differ). `root`: that release's unpacked wheel, for a release outside the
    supported ones."""
    version = version or VERSIONS[engine]
    if engine == "sglang":
        return table_of(sglang_parser(version, root), "sglang", version,
                        "python -m sglang.launch_server", underscores=False, json_dotted=False)
    # FlexibleArgumentParser.parse_args: `--a_b` reads as `--a-b`, `--x.y v` builds JSON
    parser = vllm_parser(version, root)
    spec_config = _first("SpeculativeConfig", "vllm.config.speculative", "vllm.config")
    return table_of(parser, "vllm", version, "vllm serve", underscores=True, json_dotted=True,
                    classes={"speculative_config": spec_config})


def table_in_subprocess(engine: str, version: str | None = None, root: str | None = None,
                        env: dict | None = None) -> dict:
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    version = version or VERSIONS[engine]
    proc = subprocess.run([sys.executable, os.path.join(here, "flag_tables.py"), engine, version,
                           *([root] if root else [])], env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=900, cwd=here)
    if proc.returncode != 0:
        raise RuntimeError(f"building the {engine} {version} parser failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # older vLLM logs to stdout first


def dumps(data: dict) -> str:
    """The stored form: one flag per line, so a diff names the flags that changed."""
    head = {k: v for k, v in data.items() if k != "flags"}
    lines = [json.dumps(f, separators=(", ", ": ")) for f in data["flags"]]
    body = json.dumps(head, indent=1)[:-2]
    return body + ',\n "flags": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


if __name__ == "__main__":
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    result = table(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None,
                   sys.argv[3] if len(sys.argv) > 3 else None)
    sys.stdout.flush()
    print(json.dumps(result))
