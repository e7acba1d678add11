"""Fixes said where the user works: for a `behaviour: engine` spec, the engine's own switch.

The verifier phrases every fix in spec keys (`sync.sites: {dspark_draft: on}`), which is right
for a specplan-planned deployment. A `behaviour: engine` spec models a launch line, so a fix is
the environment variable of that engine, and only what the engine can do: SGLang 0.5.23
converges the SpecTpSync sites through SGLANG_SPEC_TP_SYNC, always over its TP group (so not
under DP-attention, where that group spans replicas); converging any other site needs the
specplan plugin, which runs the plan's converges inside the engine (docs/engines.md); the fix
names `specplan enforce`, which writes that plan and the launch line that loads it. A fix that
is a layout setting says it has no launch flag. INFO findings keep naming the spec key.
"""

from __future__ import annotations

import re
from dataclasses import replace

from specplan.engines import convention
from specplan.engines.sglang.spec_tp_sync import slugs_of, value_for
from specplan.plan import Plan
from specplan.verify.findings import Finding

_CONVERGE = re.compile(r"^converge (\w+) \(sync\.sites: \{\w+: on\}\)(?P<rest>.*)$")



def _plugin(spec_file: str) -> str:
    """`specplan enforce` plans the deployment so that it converges, for the plugin to run."""
    return (f"`specplan enforce {spec_file} -o DIR` writes the plan that converges it and the "
            "launch line that loads the specplan plugin (SPECPLAN_PLAN=DIR/plan.json; docs/engines.md)")


def engine_fixes(plan: Plan, findings: list[Finding]) -> list[Finding]:
    """`findings` with ERROR and WARN fixes of an engine-behaviour plan in the engine's terms."""
    if plan.behaviour.mode != "engine":
        return findings
    engine = plan.engine
    converged = {s.name: s.converge for s in plan.sites}
    tp_is_replica = plan.derived.get("attn_dp", 1) == 1  # else the TP group spans replicas
    plugin = _plugin(plan.source.spec_file or "SPEC")
    return [f if f.severity == "INFO" or not f.fix else
            replace(f, fix=_fix(engine, converged, tp_is_replica, f, plugin)) for f in findings]


def _fix(engine: str, converged: dict[str, bool], tp_is_replica: bool, f: Finding, plugin: str) -> str:
    name = convention(engine).title  # the newest release
    match = _CONVERGE.match(f.fix)
    if match is None and "sync.group" in f.fix:
        return f"{name} converges over its own group and has no flag to change it: {plugin}"
    if match is None:
        return f"{f.fix}; a specplan setting: {name} has no launch flag for it"
    site, rest = match.group(1), match.group("rest")
    if site in convention(engine).switchable_sites and tp_is_replica:
        care = slugs_of(converged, only_on=False)
        on = slugs_of({**converged, site: True})
        return f"launch with SGLANG_SPEC_TP_SYNC={value_for(care, on)}{rest}"
    return f"{name} cannot converge {site}: {plugin}{rest}"
