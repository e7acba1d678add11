"""What both engine plugins share: activation from SPECPLAN_PLAN, refusals, the start-up check.

Activation: with SPECPLAN_PLAN unset, `activate` returns None at once (no plan read, no torch
imported, no hook installed). Set, it checks the engine's version, then loads and validates
the plan once per process (engines call their plugins several times: the result is cached).
Any reason not to run is an `EngineRefused`: a SystemExit carrying one line that names the
path and the reason. It is a SystemExit because SGLang's plugin loader logs and swallows
every Exception a plugin raises, which would let an engine start without its plan.

Start-up (inside the engine's initialize_model_parallel hook, on every rank): `check_world`
(the plan's world size is the engine's), `startup_check` (compare.py: every family, every
speculative key), then `bind_engine` (the plan's runtime on the engine's own groups). Every
rank reads the same plan and the same engine layout, so every rank refuses together.

Logging (logger `specplan`, as the engines' own plugins log through theirs): the plan loaded
(INFO), each engine function hooked (DEBUG), every refusal (ERROR), and one INFO line per rank
when it binds the plan (`log_bound`: plan, fingerprint, engine release, hooks). Where the
process has no logging set up (vLLM configures only its own `vllm` logger) the logger gets a
stderr handler of its own, at SPECPLAN_LOG_LEVEL (default INFO).
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specplan.engines.sglang import hooks as sglang_hooks
from specplan.engines.vllm.hooks import RELEASES as VLLM_RELEASES

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from specplan.plan import Plan
    from specplan.runtime import Runtime
    from specplan.runtime.batch import Batch

ENV_PLAN = "SPECPLAN_PLAN"
ENV_ALLOW_UNTESTED = "SPECPLAN_ALLOW_UNTESTED_ENGINE"
ENV_LOG_LEVEL = "SPECPLAN_LOG_LEVEL"
ENV_HOT_PATH = "SPECPLAN_HOT_PATH"  # auto | host | device: bind's hot_path (device on CPU ranks in tests)
# engine -> the releases the plugin is tested on ("0.32.x": every 0.32 patch release): SGLang's
# those whose hook signatures it handles (engines/sglang/hooks.py), vLLM's its hook tables'
# (engines/vllm/hooks.py).
SUPPORTED_VERSIONS = {"sglang": sglang_hooks.plugin_releases(),
                      "vllm": tuple(r.version for r in VLLM_RELEASES)}
# engine -> the one-line refusal of a release the engine table knows and the plugin cannot run
# on (its hooks' signatures differ there); refused even with SPECPLAN_ALLOW_UNTESTED_ENGINE.
KNOWN_REFUSALS = {"sglang": sglang_hooks.plugin_refusal}

_ACTIVE: dict[tuple[str, str], "ActivePlan"] = {}  # (engine, path) -> the plan, once per process
_LOG_FORMAT = "%(levelname)s %(asctime)s [specplan] %(message)s"


def log() -> logging.Logger:
    """The `specplan` logger, with a stderr handler of its own where nothing would print it
    (no handler on it or on the root logger: its INFO lines would be dropped)."""
    logger = logging.getLogger("specplan")
    if not logger.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_LOG_FORMAT, "%m-%d %H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(os.environ.get(ENV_LOG_LEVEL, "INFO").upper())
    return logger


class EngineRefused(SystemExit):
    """The engine must not start: one line naming the plan path (or engine) and the reason
    (logged as an ERROR when raised, as the engine may print a SystemExit nowhere)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"specplan: {message}")
        log().error("refused: %s", message)

    def __str__(self) -> str:
        return str(self.code)


@dataclass
class ActivePlan:
    """The plan SPECPLAN_PLAN names, loaded and validated, and what the plugin built from it."""

    engine: str
    path: str
    plan: Plan
    version: str = ""  # the engine's release, as the plugin read it
    runtime: object = None  # the bound specplan Runtime, once the engine's groups exist
    hooks: list[str] = field(default_factory=list)  # engine functions the plugin hooked
    engine_groups: dict = field(default_factory=dict)  # family -> every group, as the engine built them
    startup_s: dict = field(default_factory=dict)  # seconds spent in "check" and "bind"
    state: object = None  # the engine plugin's per-process hook state (SGLangState)
    # vLLM: its VllmBridge and VllmState once the runner is bound (object: common.py sits
    # below the engine plugins, which import it)
    bridge: object = None
    vllm: object = None

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def world_size(self) -> int:
        return self.plan.world_size


def enabled() -> bool:
    """Whether SPECPLAN_PLAN is set: read before anything else (the engine's version included)."""
    return bool(os.environ.get(ENV_PLAN))


def activate(engine: str, version: str) -> ActivePlan | None:
    """None when SPECPLAN_PLAN is unset; else the validated plan (the same object every call)."""
    path = os.environ.get(ENV_PLAN, "")
    if not path:
        return None
    check_version(engine, version)
    key = (engine, path)
    if key not in _ACTIVE:
        _ACTIVE[key] = active = ActivePlan(engine, path, read_plan_file(path, engine), version)
        log().info("loaded plan %r (fingerprint %s, %d ranks) from %s=%s for %s %s", active.name,
                   active.plan.fingerprint[:16], active.world_size, ENV_PLAN, path, engine, version)
    return _ACTIVE[key]


def hooked(active: ActivePlan, target: str) -> None:
    """Record (and log, DEBUG) one engine function the plugin hooked."""
    if target not in active.hooks:
        active.hooks.append(target)
        log().debug("hooked %s", target)


def log_bound(active: ActivePlan, rank: int) -> None:
    """The one line a rank logs when the plan is bound: plan, fingerprint, release, hooks."""
    hooks = ", ".join(".".join(t.split(".")[-2:]) for t in active.hooks)
    log().info("rank %d bound plan %r (fingerprint %s) on %s %s; %d hooks: %s", rank, active.name,
               active.plan.fingerprint[:16], active.engine, active.version, len(active.hooks), hooks)


def check_version(engine: str, version: str) -> None:
    """Refuse an engine version the plugin was not tested against, unless allowed by env."""
    if supported(engine, version):
        return
    known = KNOWN_REFUSALS.get(engine, lambda v: None)(version.split("+")[0])
    if known is not None:
        raise EngineRefused(known)
    if os.environ.get(ENV_ALLOW_UNTESTED) == "1":
        return
    listing = ", ".join(f"{e} {' / '.join(v)}" for e, v in SUPPORTED_VERSIONS.items())
    raise EngineRefused(f"{engine} {version} is not a supported engine version (supported: "
                        f"{listing}); set {ENV_ALLOW_UNTESTED}=1 to run it untested")


def supported(engine: str, version: str) -> bool:
    """Whether `version` (a local build label such as +cpu ignored) is a tested release."""
    release = version.split("+")[0]
    for pattern in SUPPORTED_VERSIONS[engine]:
        if pattern.endswith(".x") and release.startswith(pattern[:-1]) and release[len(pattern) - 1:].isdigit():
            return True
        if release == pattern:
            return True
    return False


def read_plan_file(path: str, engine: str) -> Plan:
    """Load SPECPLAN_PLAN and validate it: a specplan plan, for this engine, unedited."""
    from specplan.plan import PlanFileError, load_plan

    if Path(path).is_dir():
        raise EngineRefused(f"{ENV_PLAN}={path}: is a directory, not a plan.json")
    try:
        plan = load_plan(path)
    except PlanFileError as exc:
        reasons = "; ".join(f"{d.path}: {d.message}" if d.path else d.message for d in exc.diagnostics)
        raise EngineRefused(f"{ENV_PLAN}={path}: {reasons}") from None
    if plan.engine != engine:
        raise EngineRefused(f"{ENV_PLAN}={path}: plan {plan.name!r} is for engine {plan.engine!r}, "
                            f"this is {engine}")
    return plan


def check_world(active: ActivePlan, world_size: int, rank: int) -> None:
    """Refuse when the engine's world is not the plan's (every rank sees the same sizes)."""
    if world_size == active.world_size:
        return
    raise EngineRefused(f"{ENV_PLAN}={active.path}: foreign plan: plan {active.name!r} is for "
                        f"{active.world_size} ranks, the engine started {world_size} "
                        f"(this is rank {rank})")


def startup_check(active: ActivePlan, engine_groups: dict[str, list[list[int]]],
                  engine_spec: dict, *, rank: int) -> None:
    """Raise EngineRefused naming each differing family or key, this rank and both values."""
    from specplan.plugins.compare import compare

    findings = compare(active.plan, engine_groups, engine_spec, rank=rank)
    if not findings:
        return
    diffs = "; ".join(f.message for f in findings)
    raise EngineRefused(f"rank {rank}: the {active.engine} deployment is not plan {active.name!r} "
                        f"({ENV_PLAN}={active.path}): {diffs}")


def refuse_unreached_gates(active: ActivePlan, reached: frozenset[str]) -> None:
    """Refuse a plan whose safety rests on a gate the plugin cannot reach: one specplan's plan
    agrees itself ("specplan: ..." in plan.json `gates[].agreed_by`) that is not in `reached`,
    the gates the plugin agrees on the plan's group or the engine agrees there on its own
    (docs/engines.md, "Gates", lists both). Every rank reaches the same verdict, at start."""
    missing = [g for g in active.plan.gates
               if g.name not in reached and g.family is not None and g.agreed_by.startswith("specplan:")]
    if missing:
        names = "; ".join(f"{g.name} ({g.function}; the plan agrees it over {g.family})" for g in missing)
        raise EngineRefused(f"{ENV_PLAN}={active.path}: plan {active.name!r} is safe only if the "
                            f"{active.engine} plugin agrees gates it cannot reach: {names} "
                            "(docs/engines.md, Gates); start without the option that takes them")


def bind_engine(active: ActivePlan, *, rank: int, world_size: int, groups: dict,
                device: torch.device | str | None = None, hot_path: str | None = None) -> Runtime:
    """Bind the plan's runtime on the engine's own process groups (family -> this rank's group).
    `hot_path`: bind's; None reads SPECPLAN_HOT_PATH (default auto: the device path on CUDA / NPU).

    Runs after the engine's torch.distributed is up, so bind's fingerprint agreement is an
    all-gather every rank joins: two ranks with different plans both raise, neither hangs.
    """
    from specplan.runtime import FingerprintMismatch, GroupMismatch, WorldSizeMismatch, bind

    try:
        rt = bind(active.plan, rank=rank, world_size=world_size, device=device, groups=groups,
                  hot_path=hot_path or os.environ.get(ENV_HOT_PATH) or "auto")
    except (FingerprintMismatch, WorldSizeMismatch, GroupMismatch) as exc:
        raise EngineRefused(f"{ENV_PLAN}={active.path}: foreign plan: {exc}") from None
    active.runtime = rt
    return rt


def wants_identity(rt: object) -> bool:
    """Whether a call's rows are worth reading from the engine: batch identity is on (the plan's
    `runtime.batch_identity`, or bind's override) or a trace records them."""
    return bool(getattr(rt, "batch_identity", False) or getattr(rt, "trace", None))


def fit_rows(rows: tuple[Sequence, Sequence | None] | None, live_rows: int) -> Batch | None:
    """(request ids, generations) as the runtime's `requests=` for `live_rows` rows: rows past
    live_rows dropped, padding rows (a padded batch) as request -1 generation 0; None stays None."""
    if rows is None:
        return None
    from specplan.runtime.batch import Batch

    ids, gens = rows
    if len(ids) == live_rows and (gens is None or len(gens) == live_rows):
        return Batch(ids, gens)
    ids = list(ids[:live_rows]) + [-1] * max(0, live_rows - len(ids))
    if gens is None:
        return Batch(ids)
    gens = [int(g) for g in gens[:live_rows]] + [0] * max(0, live_rows - len(gens))
    return Batch(ids, gens)

