"""What launch flags change in the round (runtime.async_scheduling in plan.json).

Async scheduling (vLLM --async-scheduling, SGLang's overlap scheduler): the host schedules
round r + 1 while round r runs, so round r's decisions are consumed in round r + 1, read on
the device. A decision of `host` nature is computed from the host's view, which under async
scheduling is one round behind: every rank must be behind alike, so the plan must converge it.
"""

from __future__ import annotations

from specplan.plan import PlanView
from specplan.verify.findings import Finding


def check_launch_flags(view: PlanView) -> list[Finding]:
    out = _launch(view) + _eplb(view)
    if view.raw.runtime.async_scheduling is not True:
        return out
    out += [Finding(severity="INFO", round="decode",
                    message="async scheduling: round r's decisions (accept lengths, bonus tokens, "
                    "drafts) are consumed in round r + 1; the plan converges them in round r and "
                    "the next round reads the converged values on the device",
                    fix="nothing to change; runtime.async_scheduling: false (SGLang "
                    "--disable-overlap-schedule, vLLM --no-async-scheduling) reads them in round r")]
    for site in view.sites.values():
        host = [d.name for d in site.decisions if d.nature == "host"]
        if host and site.round == "decode" and not site.converge:
            out.append(Finding(severity="WARN", site=site.name, decision=host[0], group=site.family,
                               round=site.round, line=site.line,
                               message=f"{site.name}/{host[0]} is computed on each rank's host, which "
                               "under async scheduling sees round r - 1: ranks that lag "
                               "differently plan different rounds",
                               fix=f"converge it (sync.sites: {{{site.name}: on}}) or turn async "
                               "scheduling off"))
    return out


def _launch(view: PlanView) -> list[Finding]:
    """The engine refuses to start this topology (the refusal `specplan export` prints)."""
    why = view.raw.launch_refusal
    if not isinstance(why, str):
        return []
    return [Finding(severity="ERROR", line=view.line("topology", "speculative.method"),
                    message=f"{view.raw.engine} refuses to launch this topology: {why}",
                    fix="change the topology or method as the message says (`specplan export` "
                    "refuses it too)")]


def _eplb(view: PlanView) -> list[Finding]:
    moe = view.raw.model.moe
    if moe is None or moe.eplb is not True:
        return []
    return [Finding(severity="INFO", group="moe_ep", round="decode",
                    message="EPLB: experts move between ranks at rebalance steps; every rank must "
                    "rebalance at the same step (the engines count forward passes, which "
                    "idle DP ranks run as dummies), so expert placement stays agreed",
                    fix="nothing to change while sync.idle_ranks is dummy; with skip, idle ranks "
                    "count fewer passes and rebalance late")]
