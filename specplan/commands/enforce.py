"""`specplan enforce`: plan a `behaviour: engine` spec or launch line as specplan runs it
(ecosystem/enforce.py), write DIR/spec.yaml and DIR/plan.json together, print the launch line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specplan.commands.common import Said
from specplan.commands.fit import echo
from specplan.commands.target import Refused, refuse_errors
from specplan.errors import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, EXIT_OK

if TYPE_CHECKING:
    from specplan.ecosystem.enforce import Enforced
    from specplan.schema.model import Spec


def run(target: str | None, out: str, engine: str | None, line: list[str], environ: dict[str, str],
        script: str | None, base: str | None, model_config: str | None, name: str | None) -> int:
    """The report on stdout, import's messages on stderr; the exit code."""
    said = enforced(target, out, engine, line, environ, script, base, model_config, name)
    echo(said.text, nl=False)
    for message in said.messages:
        echo(message, err=True)
    return said.code


def enforced(target: str | None, out: str, engine: str | None, line: list[str],
             environ: dict[str, str], script: str | None, base: str | None,
             model_config: str | None, name: str | None) -> Said:
    """Enforce for the CLI and the API alike: (exit code, stdout text, stderr lines); both files
    written, or neither (an ERROR in specplan's own plan: exit 3)."""
    from specplan.ecosystem.enforce import enforce
    from specplan.io.files import staged_dir, write_atomic
    from specplan.lower import write_plan
    from specplan.schema import load_spec
    from specplan.verify.formats import render_text, terminal_width
    from specplan.verify.report import subject_of

    messages: tuple[str, ...] = ()
    if engine is not None:
        spec, messages = _imported(engine, line, environ, script, base, model_config, name)
        if spec is None:
            return Said(EXIT_BAD_INPUT, "", messages)
    else:
        assert target is not None, "enforce takes a spec or a launch line"
        spec = load_spec(target)
    out_dir = Path(out)
    done = enforce(spec, out_dir)
    try:
        refuse_errors(str(out_dir), done.findings)
    except Refused:
        text = render_text(subject_of(done.plan), done.findings, width=terminal_width(), verbose=False)
        return Said(EXIT_FOUND_PROBLEM, text, (*messages, "nothing written: even specplan's plan "
                                                           "of this deployment has errors (above)"))
    with staged_dir(out_dir) as stage:  # both files or neither
        write_atomic(stage / "spec.yaml", done.spec_text, what="the spec")
        write_plan(done.plan, stage)
    return Said(EXIT_OK, _report(spec, done, out_dir), messages)


def _report(spec: Spec, done: Enforced, out_dir: Path) -> str:
    from specplan.ecosystem.enforce import launch_line

    plan_path = out_dir / "plan.json"
    lines = [f"wrote {out_dir / 'spec.yaml'} (behaviour specplan, policy {done.spec.sync.policy})",
             f"wrote {plan_path} (fingerprint {done.plan.fingerprint[:16]}, "
             f"{len(done.plan.boundaries)} converge boundaries)"]
    if done.converged:
        lines.append(f"the plan converges what {spec.engine} did not:")
        lines += [f"  {item}" for item in done.converged]
    else:
        lines.append("the plan converges nothing the spec's own plan did not")
    warns = sum(1 for f in done.findings if f.severity == "WARN")
    if warns:
        lines.append(f"{warns} WARN remain that no converge answers: specplan check {plan_path}")
    lines.append("launch (the specplan plugin loads the plan):")
    return "\n".join(lines) + "\n" + launch_line(spec, done.spec, plan_path)


def _imported(engine: str, line: list[str], environ: dict[str, str], script: str | None,
              base: str | None, model_config: str | None,
              name: str | None) -> tuple[Spec | None, tuple[str, ...]]:
    """The spec `specplan import` makes of a launch line, or None and import's messages."""
    from specplan.commands.import_ import imported
    from specplan.schema.load import load_spec_text

    said = imported(engine, line, environ, script, base, model_config, name, None)
    if said.code != 0:
        return None, tuple(m.replace("specplan import:", "specplan enforce:", 1) for m in said.messages)
    return load_spec_text(said.text, "<the imported launch line>"), said.messages
