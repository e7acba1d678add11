"""From the paths a command is given to its Target: the one place that tells a spec from a
deployment (`target_of`), and that names a plan.json given where a spec was expected."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from specplan.commands.common import as_plan, is_plan_file
from specplan.commands.target import Target

if TYPE_CHECKING:
    from specplan.commands.spec_target import PlanTarget
    from specplan.deploy import InstancePair
    from specplan.schema.model import Spec


def target_of(loaded: Spec | InstancePair, path: str | None) -> Target:
    """The Target of a Spec or an InstancePair (what deploy.load_target or load_pair read from
    `path`; None: a spec made from a dict)."""
    from specplan.commands.deployment import DeploymentTarget
    from specplan.commands.spec_target import SpecTarget
    from specplan.deploy import InstancePair

    specs = [i.spec for i in loaded.instances] if isinstance(loaded, InstancePair) else [loaded]
    _check_engine_args(specs)
    if isinstance(loaded, InstancePair):
        return DeploymentTarget(loaded)
    return SpecTarget(loaded, path)


def _check_engine_args(specs: list[Spec]) -> None:
    """engine_args every command reads as export does: a refused entry is exit 2 (issue 37)."""
    from specplan.ecosystem.faithful import engine_args_problems
    from specplan.errors import SpecError

    problems = [d for spec in specs for d in engine_args_problems(spec)]
    if problems:
        raise SpecError(problems)


def load(path: str) -> Target:
    """A spec, a deployment file or a spec naming its peer."""
    from specplan.deploy import load_target

    return target_of(load_target(path), path)


def load_pair(first: str, second: str) -> Target:
    """Two instance specs, paired as `specplan check A.yaml B.yaml` pairs them."""
    from specplan.deploy import load_pair as pair

    return target_of(pair(first, second), first)


def load_spec_arg(path: str) -> Target:
    """The spec (or deployment) a command takes; a plan.json given instead is named as such."""
    from specplan.errors import Diagnostic, SpecError

    try:
        return load(path)
    except SpecError:
        plan = as_plan(path)
        if plan is None:
            raise
        command = click.get_current_context().info_name
        spec_file = (plan.get("source") or {}).get("spec_file") or "the spec it was compiled from"
        raise SpecError([Diagnostic(path, None, None, "", f"this is a plan; {command} takes the spec "
                                    f"(the YAML this plan was compiled from: {spec_file})")]) from None


def load_checked(targets: tuple[str, ...]) -> Target | PlanTarget:
    """What `check` takes: a plan.json (a PlanTarget), a spec or deployment, or two instance specs."""
    if len(targets) == 2:
        return load_pair(*targets)
    if not is_plan_file(targets[0]):
        return load(targets[0])
    from specplan.commands.spec_target import PlanTarget
    from specplan.plan import load_plan

    return PlanTarget(load_plan(targets[0]))
