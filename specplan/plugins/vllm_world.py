"""The vLLM plugin across processes, nodes and Ray: the plan reaches every worker, and a world
where some ranks hold it and others do not is refused on every rank at start-up.

- Ray. vLLM starts its data-parallel engine cores as Ray actors with only the variables
  vllm/ray/ray_env.py `get_env_vars_to_copy` lists (vllm/v1/engine/utils.py
  CoreEngineActorManager: the prefixes VLLM_, NCCL_, HF_, ... and the names in
  VLLM_RAY_EXTRA_ENV_VARS_TO_COPY, which vllm.envs reads when asked until enable_envs_cache);
  no SPECPLAN_ variable is among them. `copy_to_ray`, run as the plugin registers in the
  driver (`vllm serve`'s process, where vLLM loads its general plugins before it builds the
  engines), appends the variables the plugin reads (COPIED) to that list. The Ray executor's
  workers get the driver's whole environment (vllm/v1/executor/ray_env_utils.py
  `get_driver_env_vars`, applied with os.environ.setdefault in ray_executor_v2.py
  `RayWorkerProc.initialize_worker` before the worker loads its plugins): a node's own
  SPECPLAN_PLAN wins there, and the start-up agreement refuses a different one.
- Presence. A rank without SPECPLAN_PLAN reads no plan and imports nothing, but when vLLM has
  already imported parallel_state (every worker has: vllm.distributed imports it) it wraps
  initialize_model_parallel to write "no plan" into the world's start-up agreement
  (presence.py) and refuse when a peer holds one; the plan's ranks run the same agreement
  first thing in their own hook.
"""

from __future__ import annotations

import functools
import os
import sys

from specplan.plugins.common import ENV_ALLOW_UNTESTED, ENV_HOT_PATH, ENV_LOG_LEVEL, ENV_PLAN, ActivePlan

RAY_EXTRA = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"
# every variable the plugin (and the runtime it binds) reads
COPIED = (ENV_PLAN, ENV_ALLOW_UNTESTED, ENV_HOT_PATH, "SPECPLAN_TRACE_DIR", ENV_LOG_LEVEL)
_PS = "vllm.distributed.parallel_state"


def copy_to_ray() -> None:
    """Append COPIED to VLLM_RAY_EXTRA_ENV_VARS_TO_COPY (a comma-separated list), keeping what
    is there; idempotent."""
    names = [n.strip() for n in os.environ.get(RAY_EXTRA, "").split(",") if n.strip()]
    added = [n for n in COPIED if n not in names]
    if added:
        os.environ[RAY_EXTRA] = ",".join(names + added)


def agree(active: ActivePlan, rank: int, world: int) -> None:
    """The plan's ranks: every rank holds this plan (presence.py), within its timeout_s."""
    from specplan.plugins.presence import agree as presence

    presence(active.plan.fingerprint, active.name, rank, world, active.plan.runtime.timeout_s)


def guard_planless() -> None:
    """A rank without a plan: take part in the agreement when vLLM builds its groups."""
    ps = sys.modules.get(_PS)
    if ps is None:  # not a worker yet: nothing imported here
        return
    original = ps.initialize_model_parallel
    if getattr(original, "__specplan__", False) or getattr(original, "__specplan_presence__", False):
        return

    @functools.wraps(original)
    def initialize_model_parallel(*args, **kwargs):
        result = original(*args, **kwargs)
        import torch.distributed as dist

        from specplan.plugins.presence import PLANLESS_TIMEOUT_S, agree as presence

        presence(None, None, dist.get_rank(), dist.get_world_size(), PLANLESS_TIMEOUT_S)
        return result

    initialize_model_parallel.__specplan_presence__ = True  # type: ignore[attr-defined]
    setattr(ps, "initialize_model_parallel", initialize_model_parallel)
