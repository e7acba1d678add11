"""The `specplan` command line: small subcommands, lazy imports, one exit-code policy.

Exit codes: 0 done; 2 bad input (every diagnostic printed as file:line:col: path: message);
3 the command worked and found a problem; 1 an internal error, with its traceback.
"""

from __future__ import annotations

import sys

import click

from specplan import __version__
from specplan.commands.common import THRESHOLD
from specplan.errors import EXIT_BAD_INPUT
from specplan.engines.releases import RELEASES
from specplan.sim.bounds import (RANGES, SIM_MAX_LAYERS, SIM_MAX_REQUESTS, SIM_MAX_ROUNDS,
                                  faults)

ENGINE_NAMES = list(RELEASES)  # engines/<engine>/ packages (engines/releases.py)


class Commands(click.Group):
    """The subcommands under one exit-code policy: a SpecError / PlanError raised by any of them
    prints its diagnostics on stderr and exits 2."""

    def invoke(self, ctx: click.Context):
        from specplan.errors import UserError

        try:
            return super().invoke(ctx)
        except UserError as exc:
            for diag in exc.diagnostics:
                click.echo(str(diag), err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.ClickException as exc:  # a usage error: its message fits beside "Error: "
            _fit_message(exc)
            raise


def _fit_message(exc: click.ClickException) -> None:
    """Wrap the prose `exc.show()` prints after "Error: " to the terminal's width, between
    words (a word longer than the width stays whole)."""
    import textwrap

    from specplan.verify.formats import terminal_width

    message, width = exc.format_message, max(terminal_width() - len("Error: "), 20)

    def fitted() -> str:
        return "\n".join(textwrap.fill(part, width, subsequent_indent="  ", break_long_words=False,
                                       break_on_hyphens=False) for part in message().split("\n"))

    exc.format_message = fitted  # type: ignore[method-assign]


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="specplan")
def main() -> None:
    """Plan, prove and run rank agreement for speculative decoding on many GPUs.

    Example: specplan explain specs/deepseek-v4-dspark-tp16-dp8.yaml
    """


@main.command()
@click.argument("spec", type=click.Path(dir_okay=True))
@click.option("--rank", "rank", type=int, default=None, help="Show one rank's view.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
@click.option("--all-families", is_flag=True, help="Also list families of one-rank groups.")
@click.option("--picture", type=click.Choice(["ranks", "round", "kv"]), default=None,
              help="Draw the rank grid or the round graph (a deployment: kv, both instances' "
                   "grids with the KV handoff) instead of printing tables.")
@click.option("--format", "fmt", type=click.Choice(["svg", "png", "mermaid", "dot"]), default="svg",
              show_default=True, help="Picture format (png: needs cairosvg or vl-convert-python).")
@click.option("--family", default=None, help="ranks picture: the group family outlined "
              "(default attn_tp under DP-attention, else tp).")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Picture file to write (default: stdout).")
def explain(spec: str, rank: int | None, as_json: bool, all_families: bool, picture: str | None,
            fmt: str, family: str | None, out: str | None) -> None:
    """Show which ranks form which groups, the stages and the replicas of SPEC.

    Example: specplan explain specs/deepseek-v4-dspark-tp16-dp8.yaml --rank 3

    Example: specplan explain specs/kimi-k3-dspark-tp8-pp2.yaml --picture round -o round.svg
    """
    from specplan.commands.explain import run

    sys.exit(run(spec, rank=rank, as_json=as_json, picture=picture, fmt=fmt, family=family, out=out,
                 all_families=all_families))


@main.command(name="compile")
@click.argument("spec", type=click.Path(dir_okay=True))
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Output directory (default build/<name>/).")
def compile_(spec: str, out_dir: str | None) -> None:
    """Plan SPEC and write plan.json (and, with torch, the runtime module).

    Example: specplan compile specs/kimi-k3-dspark-tp8-pp2.yaml -o build/kimi
    """
    from specplan.commands import compile as command

    sys.exit(command.run(spec, out_dir))


@main.command()
@click.argument("targets", nargs=-1, required=True, type=click.Path(dir_okay=True))
@click.option("--json", "as_json", is_flag=True, help='Print {"findings": [...]} (same as --format json).')
@click.option("--format", "fmt", type=click.Choice(["text", "json", "sarif", "junit"]), default="text",
              show_default=True, help="text for people; json, SARIF 2.1.0 or JUnit XML for CI.")
@click.option("--severity", type=click.Choice(["error", "warn", "info"]), default="info",
              show_default=True, help="Show findings at this severity or worse.")
@click.option("-v", "--verbose", is_flag=True, help="Text: each finding on its own line, with its "
              "explanation, fix and YAML line (else WARNs of one class are one line).")
@click.option("--baseline", type=click.Path(dir_okay=False), default=None,
              help="Report only findings not in FILE (a --write-baseline file, or a check "
                   "--format json or sarif output); json, sarif and junit mark each finding.")
@click.option("--write-baseline", type=click.Path(dir_okay=False), default=None,
              help="Record today's findings in FILE (atomically), as --baseline reads them.")
def check(targets: tuple[str, ...], as_json: bool, fmt: str, severity: str, verbose: bool,
          baseline: str | None, write_baseline: str | None) -> None:
    """Prove the plan of TARGET (a spec YAML, a deployment or a plan.json) free of desyncs and
    deadlocks; given two instance specs, check them against each other too.

    Exit 0 when there is no ERROR, 3 when there is (whatever --severity shows; with
    --baseline, only an ERROR not in the baseline).

    Example: specplan check specs/deepseek-v4-dspark-tp8-dp8.yaml --format sarif > check.sarif

    Example: specplan check SPEC --write-baseline base.json; specplan check SPEC --baseline base.json

    Example: specplan check prefill.yaml decode.yaml
    """
    from specplan.commands.check import run

    sys.exit(run(targets, as_json=as_json, fmt=fmt, severity=severity, verbose=verbose,
                 baseline=baseline, write_baseline=write_baseline))


def _finite(param, value: float | None) -> float | None:
    # FloatRange lets nan through (every comparison with nan is false)
    if value is not None and value != value:
        raise click.BadParameter(f"expected a number, found {value}", param=param)
    return value


@main.command(name="diff")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--acceptance", is_flag=True,
              help="Compare two runs (RUN_A RUN_B, their trace dirs): exit 3 when B's mean "
                   "accepted length per request and round falls short of A's by more than "
                   "--threshold.")
@click.option("--threshold", type=click.FloatRange(*THRESHOLD), default=5.0, show_default=True,
              callback=lambda ctx, param, value: _finite(param, value),
              help="--acceptance: the shortfall of B against A, in percent (0 .. 100), that fails.")
def diff_(traces: tuple[str, ...], acceptance: bool, threshold: float) -> None:
    """Find the first divergence across per-rank traces (runtime.trace_dir files or dirs).

    Prints round, site, decision, requests, ranks and values; exit 3 when ranks diverge, exit 2
    when the traces were written under different plans (fingerprints).

    Example: specplan diff /tmp/trace/rank0.jsonl /tmp/trace/rank1.jsonl

    Example: specplan diff --acceptance runs/pp1 runs/pp2 --threshold 3
    """
    from specplan.commands.diff import run

    sys.exit(run(traces, acceptance=acceptance, threshold=threshold))


@main.command()
def schema() -> None:
    """Print the JSON Schema of the spec YAML (every key with its description and default).

    Editors use it through the first line of a spec:
    # yaml-language-server: $schema=../docs/spec.schema.json

    Example: specplan schema > spec.schema.json
    """
    from specplan.schema.reference import schema_text

    sys.stdout.write(schema_text())


@main.command(name="export")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--engine", type=click.Choice(ENGINE_NAMES), default=None,
              help="Engine to launch on (default: the spec's; the other translates the layout).")
@click.option("--engine-version", "version", default=None,
              help="The release whose spelling to write (default: the spec's engine_version).")
@click.option("--nodes", "per_node", is_flag=True, default=False,
              help="One line per node (topology.nodes), each with SPECPLAN_PLAN in front.")
@click.option("--executor", type=click.Choice(["mp", "ray"]), default=None,
              help="With --nodes: vLLM's executor across nodes (default mp; SGLang: mp).")
@click.option("--head-address", "head", default=None, metavar="HOST[:PORT]",
              help="With --nodes: the head node's address (default: \"$HEAD_ADDR\").")
@click.option("--format", "fmt", type=click.Choice(["script", "lws"]), default="script",
              help="lws: a Kubernetes LeaderWorkerSet manifest, one pod per node.")
def export_(spec: str, engine: str | None, version: str | None, per_node: bool,
            executor: str | None, head: str | None, fmt: str) -> None:
    """Print the command line and environment that run SPEC on an engine (a deployment: one
    launch per instance, with its disaggregation flags; an instance on several nodes: one line
    per node).

    Exit 3 naming the reason when the engine cannot run the spec.

    Example: specplan export specs/deepseek-v4-dspark-tp8-dp8.yaml --engine sglang
    """
    from specplan.commands import export as command

    nodes = None
    if per_node or executor or head or fmt != "script":
        from specplan.ecosystem.nodes import NodeOptions

        nodes = NodeOptions(executor=executor, head=head, fmt=fmt)
    sys.exit(command.run(spec, engine, version, nodes))


def launch_line_inputs(when: str = ""):
    """-f/--file, --base, --model-config and --name: what a launch line is read with beside
    itself, by `import` and by `enforce --engine` alike (commands/import_.py `imported`).
    `when` starts each help text with the option that makes them apply."""
    path = click.Path(dir_okay=False)
    options = (
        click.option("-f", "--file", "script", type=path, default=None,
                     help=f"{when}Read the launch line from a shell script (e.g. `specplan "
                          "export` output)."),
        click.option("--base", type=path, default=None,
                     help=f"{when}Spec giving what a launch line cannot: model shape, sampling, "
                          "runtime."),
        click.option("--model-config", type=path, default=None,
                     help=f"{when}The target's config.json, for the model shape."),
        click.option("--name", default=None,
                     help=f"{when}Spec name (default: the base's or the model's)."),
    )

    def add(fn):
        for option in reversed(options):  # as stacked decorators: --help lists them in order
            fn = option(fn)
        return fn

    return add


@main.command(name="import", context_settings={"ignore_unknown_options": True})
@click.option("--engine", type=click.Choice(ENGINE_NAMES), required=True,
              help="The engine the launch line starts.")
@launch_line_inputs()
@click.option("--draft-config", type=click.Path(dir_okay=False), default=None,
              help="The draft's config.json, for EAGLE3's taps (default: beside a local draft "
                   "path, or in the Hugging Face cache).")
@click.option("-o", "--out", type=click.Path(dir_okay=False), default=None,
              help="Write the YAML here (atomically) instead of stdout.")
@click.option("--engine-version", "version", default=None,
              help="The release whose flags read the line (default: the newest supported "
                   "release whose flags accept every flag of it; import says which).")
@click.option("--strict", is_flag=True, default=False,
              help="Refuse a flag spelled as a release older than the supported ones spelled "
                   "it (default: read it as its supported spelling, one note per flag).")
@click.option("--env", "env_vars", multiple=True, metavar="NAME=VALUE",
              help="A shell variable the line uses and the script does not assign (repeatable).")
@click.option("--use-env", is_flag=True, default=False,
              help="Take the shell variables the line uses from this environment too.")
@click.argument("line", nargs=-1, type=click.UNPROCESSED)
def import_(engine: str, script: str | None, base: str | None, model_config: str | None,
            draft_config: str | None, name: str | None, out: str | None, version: str | None,
            strict: bool, env_vars: tuple[str, ...], use_env: bool,
            line: tuple[str, ...]) -> None:
    """Read an engine launch line (and its SGLANG_* / VLLM_* environment) into a spec YAML.

    Example: specplan import --engine vllm -- vllm serve meta-llama/Llama-3.2-1B -tp 2
    """
    import os

    from specplan.commands.import_ import run

    from specplan.commands.import_ import LineOptions

    options = LineOptions(strict=strict, variables=env_vars, use_env=use_env)
    sys.exit(run(engine, list(line), dict(os.environ), script, base, model_config, name, out,
                 draft_config, version, options))


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), required=True,
              help="Folder for spec.yaml and plan.json (written together, or neither).")
@click.option("--engine", type=click.Choice(ENGINE_NAMES), default=None,
              help="Read a launch line (after `--`) as `specplan import` does, instead of SPEC.")
@launch_line_inputs(when="--engine: ")
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def enforce(out: str, engine: str | None, script: str | None, base: str | None,
            model_config: str | None, name: str | None, words: tuple[str, ...]) -> None:
    """Plan SPEC (a `behaviour: engine` spec, or `--engine E -- LINE`) as specplan would run
    it, converging every decision `check` warned about: write OUT/spec.yaml and OUT/plan.json
    and print the launch line with SPECPLAN_PLAN=OUT/plan.json in front (the specplan plugin).

    Exit 3, writing nothing, when even specplan's plan has errors.

    Example: specplan enforce specs/engine/llama-3.1-8b-eagle-tp8-sglang-engine.yaml -o enforced

    Example: specplan enforce --engine sglang -o enforced -- python -m sglang.launch_server --tp 2 ...
    """
    import os

    from specplan.commands.enforce import run

    if engine is None and len(words) != 1:
        raise click.UsageError("enforce takes one SPEC, or --engine E -- LINE")
    target = None if engine else words[0]
    sys.exit(run(target, out, engine, list(words), dict(os.environ), script, base, model_config,
                 name))


class InjectChoice(click.Choice):
    """simulate's --inject: one of the faults, or `gate:<name>` (one gate of the plan)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.startswith("gate:") and len(value) > 5:
            return value
        return super().convert(value, param, ctx)


@main.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--rounds", default=16, show_default=True, type=click.IntRange(*RANGES.rounds),
              help=f"Decode rounds after the prefill (at most {SIM_MAX_ROUNDS}).")
@click.option("--requests", default=4, show_default=True, type=click.IntRange(*RANGES.requests),
              help=f"Requests, spread over the replicas (at most {SIM_MAX_REQUESTS}).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(*RANGES.seed),
              help="Seed of the weights, the prompts and the sampling coins (0 .. 2**63 - 1).")
@click.option("--max-layers", default=16, show_default=True, type=click.IntRange(*RANGES.max_layers),
              help=f"Shrink deeper models to this many layers (stages and tap owners kept; at "
                   f"most {SIM_MAX_LAYERS}).")
@click.option("--inject", type=InjectChoice(faults()),
              metavar="FAULT", help="A fault: noise on the target's logits, draft-noise on the drafter's, verify-noise "
                   "on DSpark / DFlash verify plans (each on every rank but the sources), tap-order "
                   "(a pp >= 3 middle stage hands its taps out of order: lower acceptance), a rank "
                   "killed, a foreign plan; layer-map (deployments); stale-slot, early-stop "
                   "(--chunked-prefill); gate or gate:NAME (each rank reads its own value at every "
                   "gate of the plan, or at the one named: explain lists them).")
@click.option("--chunked-prefill", "chunk", type=click.IntRange(*RANGES.chunk), metavar="CHUNK", help="Serve prompts in "
              "chunks of CHUNK tokens beside decoding requests; state rows reused while pp entries are in flight.")
@click.option("--allow-errors", is_flag=True,
              help="Run a spec `check` rejects, to watch the predicted failure happen.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object "
              "(keys: specplan/sim/report.py report_json); progress stays on stderr.")
@click.option("--trace-dir", type=click.Path(file_okay=False), default=None,
              help="Write each rank's runtime trace (converges, accepted lengths) to "
                   "DIR/rank<R>.jsonl, for `specplan diff` and `diff --acceptance`.")
@click.option("--timeout-s", type=click.FloatRange(*RANGES.timeout_s), default=None, metavar="S",
              callback=lambda ctx, param, value: _finite(param, value),
              help="Seconds a rank waits on a collective before the run fails by that collective "
                   "(default 20, and 2.5 a rank from 8 ranks up; raise it on a loaded machine).")
def simulate(spec: str, rounds: int, requests: int, seed: int, max_layers: int,
             inject: str | None, chunk: int | None, allow_errors: bool, as_json: bool,
             trace_dir: str | None, timeout_s: float | None) -> None:
    """Run SPEC's whole topology on the CPU: one process per rank, a tiny float64 model.

    Exit 0 when every replica's ranks agreed on every decision and (greedy) every request's
    tokens equal plain greedy decoding on one process; 3 otherwise, and 3 with the findings,
    without running, when `specplan check` finds an ERROR (--allow-errors runs it anyway).

    Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, ... set) it runs as one rank of the job,
    gloo over TCP across nodes; global rank 0 prints the report, every rank exits alike.

    Example: specplan simulate specs/llama-3.2-1b-eagle3-pp2.yaml --rounds 32

    Example: torchrun --nnodes 2 --nproc-per-node 2 --node-rank 0 --master-addr HOST
    --master-port 29500 -m specplan simulate SPEC --rounds 8
    """
    from specplan.commands.simulate import run
    from specplan.commands.target import Simulation

    sys.exit(run(spec, Simulation(rounds=rounds, requests=requests, seed=seed,
                                  max_layers=max_layers, inject=inject, chunk=chunk,
                                  allow_errors=allow_errors, as_json=as_json,
                                  trace_dir=trace_dir, timeout_s=timeout_s)))


if __name__ == "__main__":
    main()
