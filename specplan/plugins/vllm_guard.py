"""What keeps the vLLM plugin from making a run silently wrong: every target checked against its
release's table (engines/vllm/hooks.py) when its hook is installed, and an exception a hook
raises ending the process.

Install: `resolve(hook, version, table)` finds the function and compares its signature (as
`inspect.signature` prints it, annotations dropped) with the table's; a missing function or
another signature is an EngineRefused naming the function, both signatures and the engine
version, so vLLM never runs a hook written for another release (vLLM 0.32's
`PPHandler.receive(self, input_batch)` under a hook for 0.33.0's `(self, input_batch,
recv_drafts)` raised a TypeError on every step of the first stage, and the run went on).

Run: vLLM reports a worker's exception only from its output rank; any other worker's is logged
and dropped, and that rank goes on with half-updated state. So an exception raised by the
plugin's part of a hook is printed (one line naming the rank, the error and the hooked function,
then the traceback) and the process ends at once (`os._exit`): exit 3 for the runtime's
divergence errors (the ranks were found to disagree), 1 for any other. vLLM's executor sees its
worker die and stops the engine, which exits non-zero; a collective a peer still waits in fails
on that peer, whose hook ends it alike. An exception raised by vLLM's own function inside the
wrapper passes through unchanged (vLLM's error, vLLM's handling); so does EngineRefused (a
refusal of the start, which every worker reports).

Worked example, 2 ranks, tp 1 x pp 2: stage 0's receive hook raises; rank 0 prints
`specplan: rank 0: RuntimeError: ... (in the plugin's hook of vllm.v1.worker.gpu.pp_utils.
PPHandler.receive); ending this process ...` and exits 1; rank 1's next broadcast to it fails,
rank 1 exits the same way; vLLM's executor reports both workers dead.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from specplan.engines.hooks import Hook
from specplan.engines.vllm.hooks import Release
from specplan.errors import EXIT_FOUND_PROBLEM, EXIT_INTERNAL
from specplan.plugins.common import EngineRefused

EXIT_DIVERGENCE = EXIT_FOUND_PROBLEM  # the ranks were found to disagree
_ENGINE_RAISED = "__specplan_engine_raised__"


def signature_of(fn: Callable[..., Any]) -> str:
    """`(self, input_batch, recv_drafts)`: names, kinds and defaults, no annotations."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))


def locate(hook: Hook, version: str, table: Release) -> tuple[Any, str, Callable[..., Any]]:
    """(owner, name, function) of a table entry; EngineRefused when vLLM has no such function."""
    try:
        owner: Any = importlib.import_module(hook.module)
    except ImportError as exc:
        raise _missing(hook, version, table, f"module {hook.module} does not import ({exc})") from None
    *path, name = hook.qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            raise _missing(hook, version, table, f"{hook.module} has no {hook.qualname}")
    fn = getattr(owner, name, None)
    if fn is None:
        raise _missing(hook, version, table, f"{hook.module} has no {hook.qualname}")
    check_signature(hook, fn, version, table)
    return owner, name, fn


def check_signature(hook: Hook, fn: Callable[..., Any], version: str, table: Release) -> None:
    found = signature_of(fn)
    if found == hook.signature:
        return
    raise EngineRefused(f"vllm {version}: {hook.target}{found} differs from {hook.target}"
                        f"{hook.signature} in the plugin's table for vLLM {table.version}; the "
                        "plugin does not run on it")


def _missing(hook: Hook, version: str, table: Release, why: str) -> EngineRefused:
    return EngineRefused(f"vllm {version}: {why}; the plugin's table for vLLM {table.version} names "
                         f"{hook.target}{hook.signature}")


def engine_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, its exceptions marked as vLLM's own (passed through by `guarded`)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            _mark(exc)
            raise

    return call


def guarded(target: str, rank_of: Callable[[], object], body: Callable[..., Any], *args: Any,
            **kwargs: Any) -> Any:
    """body(*args, **kwargs); an exception of the plugin's own ends the process (`fatal`)."""
    try:
        return body(*args, **kwargs)
    except EngineRefused:
        raise
    except BaseException as exc:
        if getattr(exc, _ENGINE_RAISED, False):
            raise
        fatal(target, rank_of(), exc)


def fatal(target: str, rank: object, exc: BaseException) -> None:
    """Print the one line and the traceback, then end this process (see the module docstring)."""
    from specplan.runtime.errors import RuntimeDivergence

    code = EXIT_DIVERGENCE if isinstance(exc, RuntimeDivergence) else EXIT_INTERNAL
    line = " ".join(f"{type(exc).__name__}: {exc}".split())
    sys.stdout.flush()
    sys.stderr.write(f"specplan: rank {rank}: {line} (in the plugin's hook of {target}); ending "
                     f"this process (exit {code}): vLLM reports a worker's exception only from "
                     "its output rank\n")
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    sys.stderr.flush()
    os._exit(code)


def _mark(exc: BaseException) -> None:
    try:
        setattr(exc, _ENGINE_RAISED, True)
    except AttributeError:  # an exception type without instance attributes: treat as ours
        pass
