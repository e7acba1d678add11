"""Rank programs for the vLLM plugin across a world (tests/engines/test_vllm_world.py): vLLM
0.33.0's own code, the plugin loaded by vLLM's own loader, one process per rank (tests/ranks.py).

- `mixed`: ranks in `without` start with SPECPLAN_PLAN unset, the others with the plan; every
  rank builds its groups with vLLM's real initialize_model_parallel on gloo.
- `ray_driver` / `ray_worker`: the path of the plan from `vllm serve`'s process to a Ray worker,
  through vLLM's real functions: vllm/ray/ray_env.py get_env_vars_to_copy (what the engine-core
  actors get), vllm/v1/executor/ray_env_utils.py get_driver_env_vars and ray_executor_v2.py
  RayWorkerProc.initialize_worker (what each Ray worker applies before it loads its plugins).
  Stand-ins: Ray itself (not installed; vLLM's CPU platform refuses the Ray executor) and the
  worker's own start (WorkerProc.__init__, which needs a device and a model), replaced by what
  it does first with the plugins, vllm.plugins.load_general_plugins.
"""

from __future__ import annotations

import json
import os
import sys

from tests.ranks import serve_engine

PLAN_VARS = ("SPECPLAN_PLAN", "SPECPLAN_HOT_PATH")


def main(argv: list[str]) -> None:
    """argv: the worker, the wheel's root, the worker's arguments (tests/ranks.py's protocol)."""
    serve_engine(WORKERS, argv, "vllm_harness")


def mixed(tp: str, pp: str, speculative: str, without: str, silent: str = "") -> dict:
    """Ranks in `without` start without SPECPLAN_PLAN; ranks in `silent` without specplan at
    all (vLLM loads no general plugin there)."""
    import vllm_harness

    rank = int(os.environ["RANK"])
    if str(rank) in without.split(","):
        os.environ.pop("SPECPLAN_PLAN", None)
    if str(rank) in silent.split(","):
        import vllm.plugins

        vllm.plugins.load_general_plugins = lambda: None
    ps = vllm_harness.start_engine(int(tp), int(pp), 1, json.loads(speculative))
    return {"rank": rank, "tp": ps._TP.group_ranks}


def ray_driver() -> dict:
    """`vllm serve`'s process: the copy list before and after vLLM loads its plugins, and the
    environment a Ray engine-core actor starts with (CoreEngineActorManager: the listed names
    present in the driver's environment)."""
    from vllm.plugins import load_general_plugins
    from vllm.ray.ray_env import get_env_vars_to_copy
    from vllm.v1.executor.ray_utils import WORKER_SPECIFIC_ENV_VARS

    before = get_env_vars_to_copy(exclude_vars=WORKER_SPECIFIC_ENV_VARS)
    load_general_plugins()
    after = get_env_vars_to_copy(exclude_vars=WORKER_SPECIFIC_ENV_VARS)
    actor = {name: os.environ[name] for name in after if name in os.environ}
    return {"before": sorted(n for n in before if n.startswith("SPECPLAN_")),
            "after": sorted(n for n in after if n.startswith("SPECPLAN_")),
            "extra": os.environ.get("VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"), "actor": actor}


def ray_worker(actor_env: str) -> dict:
    """The engine-core actor (started with `actor_env` only) collects the driver variables for
    its Ray workers; a worker on another node (no SPECPLAN_ variable of its own) applies them
    and loads its plugins."""
    own = {k: v for k, v in os.environ.items() if not k.startswith("SPECPLAN_")}
    os.environ.clear()
    os.environ.update({**own, **json.loads(actor_env)})
    RayWorkerProc, WorkerProc, ray_utils, get_driver_env_vars = _ray_modules()
    driver_env = get_driver_env_vars(worker_specific_vars=ray_utils.WORKER_SPECIFIC_ENV_VARS)
    os.environ.clear()
    os.environ.update(own)  # the remote node's worker process
    seen: dict = {}

    def start(self, **kwargs):  # WorkerProc.__init__: the worker's plugins come first
        from vllm.plugins import load_general_plugins

        from specplan.plugins import common

        load_general_plugins()
        seen.update(plan=os.environ.get("SPECPLAN_PLAN"),
                    active=[a.path for a in common._ACTIVE.values()],
                    hooks=[h for a in common._ACTIVE.values() for h in a.hooks])

    WorkerProc.__init__ = start
    worker = RayWorkerProc.__new__(RayWorkerProc)
    worker._init_kwargs = {"vllm_config": None}
    worker.initialize_worker(0, {}, "tcp://127.0.0.1:1", driver_env)
    return {"driver_env": sorted(n for n in driver_env if n.startswith("SPECPLAN_")), **seen}


def _ray_modules():
    """vLLM's Ray executor modules, Ray itself a stand-in (vLLM imports it when installed)."""
    from sglang_harness import _StubFinder

    sys.meta_path.insert(0, _StubFinder({"ray"}))
    import ray

    from vllm.v1.executor import ray_utils

    ray_utils.ray = ray  # as when Ray is installed (ray_utils imports it in a try)
    from vllm.v1.executor.multiproc_executor import WorkerProc
    from vllm.v1.executor.ray_env_utils import get_driver_env_vars
    from vllm.v1.executor.ray_executor_v2 import RayWorkerProc

    return RayWorkerProc, WorkerProc, ray_utils, get_driver_env_vars


WORKERS = {"mixed": mixed, "ray_driver": ray_driver, "ray_worker": ray_worker}

if __name__ == "__main__":
    main(sys.argv[1:])
