"""Engine plugins: the plan `specplan check` proves is the plan that runs inside the engine.

    pip install specplan; SPECPLAN_PLAN=/path/plan.json python -m sglang.launch_server ...

Entry points (pyproject): `sglang.srt.plugins` -> specplan.plugins.sglang:register and
`vllm.general_plugins` -> specplan.plugins.vllm:register. With SPECPLAN_PLAN unset a plugin
installs nothing and imports no torch. The engines are never a dependency of specplan: each
engine module imports its engine lazily, inside register(). docs/engines.md has the tables.

Shared by both plugins (common.py, compare.py): `compare` (the start-up check without an
engine), `activate`, `startup_check`, `bind_engine`, `EngineRefused`.
"""

from specplan.plugins.common import (ENV_ALLOW_UNTESTED, ENV_PLAN, SUPPORTED_VERSIONS, ActivePlan,
                                     EngineRefused, activate, bind_engine, check_version, enabled,
                                     check_world, startup_check)
from specplan.plugins.compare import SPEC_KEYS, compare, format_ranks, plan_settings

__all__ = ["ENV_ALLOW_UNTESTED", "ENV_PLAN", "SPEC_KEYS", "SUPPORTED_VERSIONS", "ActivePlan",
           "EngineRefused", "activate", "bind_engine", "check_version", "check_world", "compare", "enabled",
           "format_ranks", "plan_settings", "startup_check"]
