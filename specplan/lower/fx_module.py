"""Lowering, torch half: each rank class's round programs as torch.fx graphs, emitted as a module.

`build_graph(plan, stage, kind)` turns one program of plan.json's `rank_classes` (the startup,
prefill or decode round of one pipeline stage) into a `torch.fx.GraphModule`: placeholders
`rt`, `round_`, `live_rows` and one per decision the engine hands in (by decision name,
default None), then one call_function node per planned collective, in program order, calling
`specplan.runtime.steps` with the boundary id or relayed site as argument, and a `finalize`
node after the collective that completes an accept site. Families, sources and packed layouts
are not arguments: the runtime reads them from the plan it bound, which the fingerprint check
at the head of every program proves to be the plan the module was generated from. Forwards and stage handoffs stay the engine's: an engine composes them in by
splitting or wrapping the graph. `render_module(plan)` emits every graph's code with jinja2
as one module; `write_runtime_module` writes it beside plan.json. Same plan, same bytes.

Imported only by the torch half of `specplan compile`, after plan.json is written.
"""

from __future__ import annotations

import operator
import pprint
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import jinja2
import torch
import torch.fx

from specplan.io.files import write_atomic
from specplan.plan import Plan, load_plan
from specplan.plan.codec import encode
from specplan.plan.load import PlanSource
from specplan.plan.model import Site
from specplan.plan.view import Step
from specplan.runtime import steps
from specplan.runtime.commit import accept_site
from specplan.runtime.plan_view import GuardedCollective, PlanView

ROUND_KINDS = ("startup", "prefill", "decode")
PARAMS = ("rt", "round_", "live_rows")
STEPS = ("check_plan", "converge_boundary", "relay_site", "exchange_token_counts", "finalize")
_UNUSED = re.compile(r";  (?:\w+ = )+None$", re.M)  # fx frees dead values; noise in a module
_KWARG = re.compile(r"\b(\w+) = ")


class _Builder:
    """Builds one program's graph; `held` maps each decision to the node that holds it now."""

    def __init__(self, view: PlanView, stage: int, kind: str):
        self.view, self.stage, self.kind = view, stage, kind
        self.graph = torch.fx.Graph()
        self.rt, self.round, self.live = (self.graph.placeholder(p) for p in PARAMS)
        self.last_input = self.live
        self.held: dict[str, torch.fx.Node] = {}
        self.out: dict[str, torch.fx.Node] = {}

    def value(self, name: str) -> torch.fx.Node:
        """The node holding `name` now: a collective's output, else the engine's input."""
        if name in self.held:
            return self.held[name]
        with self.graph.inserting_after(self.last_input):
            node = self.last_input = self.graph.placeholder(name, default_value=None)
        self.held[name] = node
        return node

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
             name: str) -> torch.fx.Node:
        return self.graph.create_node("call_function", fn, args, kwargs, name=name)

    def take(self, node: torch.fx.Node, decisions: Iterable[str]) -> None:
        for d in decisions:
            self.held[d] = self.out[d] = self.call(operator.getitem, (node, d), {}, d)

    def collective(self, fn: Callable[..., Any], key: int | str, b: GuardedCollective,
                   name: str) -> None:
        kwargs = dict(round=self.round, live_rows=self.live)
        kwargs.update({d: self.value(d) for d in b.decisions})
        self.take(self.call(fn, (self.rt, key), kwargs, name), b.decisions)

    def token_counts(self) -> None:
        kwargs = dict(round=self.round)
        counts = self.value("token_counts")
        self.held["token_counts"] = self.out["token_counts"] = self.call(
            steps.exchange_token_counts, (self.rt, counts), kwargs, "token_counts")

    def finalize(self, sites: list[Site]) -> None:
        """One finalize per round. Several accept sites are alternatives (a mixed batch: the
        greedy site when every row is greedy, else the sampled one): the engine names the one
        that fired in the `accept_site` input, and finalize reads that site's decisions."""
        names = [d.name for site in sites for d in site.decisions]
        kwargs = dict(live_rows=self.live, prefix_lens=self.value("prefix_lens"))
        if any(accept_site(self.view.plan, s.name).accept != "path" for s in sites):
            kwargs["draft_tokens"] = self.value("draft_tokens")  # a chain finalized by counts
        kwargs.update({d: self.value(d) for d in names})
        one = len(sites) == 1
        which = sites[0].name if one else self.value("accept_site")
        self.out["accepted"] = self.call(steps.finalize, (self.rt, which), kwargs,
                                         f"finalize_{sites[0].name if one else 'fired'}")


def build_graph(plan: PlanSource | PlanView, stage: int, kind: str) -> torch.fx.GraphModule:
    """One round kind of one pipeline stage as a GraphModule (an empty root module)."""
    view = plan if isinstance(plan, PlanView) else PlanView(plan)
    bld = _Builder(view, stage, kind)
    bld.call(steps.check_plan, (bld.rt, view.fingerprint), {}, "plan_checked")
    ops = view.program(stage, kind)
    point, accepts = _accept_point(view, ops)
    for i, step in enumerate(ops):
        if step[0] == "boundary":
            b = view.boundaries[step[1]]
            bld.collective(steps.converge_boundary, b.id, b, f"b{b.id}_{b.sites[0]}")
        elif step[0] == "relay":
            site = step[1]
            r = view.relay_of(site)
            assert r is not None, f"the program relays {site!r}, which the plan's relays lack"
            bld.collective(steps.relay_site, site, r, f"relay_{site}")
        else:
            bld.token_counts()
        if i == point:
            bld.finalize([view.sites[site] for site in accepts])
    bld.graph.output(bld.out)
    bld.graph.lint()
    clash = [n.name for n in bld.graph.nodes if n.name in STEPS]
    assert not clash, f"node names {clash} would shadow the steps the module imports"
    return torch.fx.GraphModule(torch.nn.Module(), bld.graph, class_name=f"Stage{stage}{kind.title()}")


def build_graphs(plan: PlanSource | PlanView) -> dict[tuple[int, str], torch.fx.GraphModule]:
    """Every (stage, round kind) program of the plan, stages in order."""
    view = plan if isinstance(plan, PlanView) else PlanView(plan)
    stages = sorted(c.stage for c in view.plan.rank_classes)
    return {(s, k): build_graph(view, s, k) for s in stages for k in ROUND_KINDS}


def _accept_point(view: PlanView, ops: list[Step]) -> tuple[int, list[str]]:
    """(op index after which this stage holds every accept site's decisions, those sites in
    plan order); (-1, []) for a program without an accept."""
    last: dict[str, int] = {}
    for i, step in enumerate(ops):
        sites = (view.boundaries[step[1]].sites if step[0] == "boundary"
                 else (step[1],) if step[0] == "relay" else ())
        for s in sites:
            if view.sites[s].phase == "accept":
                last[s] = i
    ordered = [s for s in view.sites if s in last]
    return (max(last.values()), ordered) if last else (-1, [])


def function_source(gm: torch.fx.GraphModule, name: str, doc: str) -> str:
    """The graph's generated Python as a plain module-level function calling steps by name."""
    code = gm.graph.python_code(root_module="self")
    src = code.src
    for glob, obj in sorted(code.globals.items()):
        if getattr(obj, "__module__", None) == steps.__name__:
            src = re.sub(rf"\b{glob}\b", obj.__name__, src)
    src = _UNUSED.sub("", src.strip())
    head, body = src.split("\n", 1)
    body = "\n".join(_tidy(line) for line in body.splitlines())
    params = head[len("def forward(self, "):-len("):")].replace(" = None", "=None")
    assert head.startswith("def forward(self, "), head
    return f'def {name}({params}):\n    """{doc}"""\n{body.rstrip()}\n'


def _tidy(line: str) -> str:
    """PEP 8 keyword arguments: `f(a, k = v)` -> `f(a, k=v)` (fx spaces them like assignments)."""
    target, eq, value = line.partition(" = ")
    return target + eq + _KWARG.sub(r"\1=", value) if eq else line


def module_name(plan: PlanSource) -> str:
    """The module's name for a plan (a Plan, plan.json's path or content)."""
    return "runtime_" + re.sub(r"\W", "_", load_plan(plan).name)


def render_module(plan: PlanSource) -> str:
    """The runtime module's source: constants, one function per (stage, round kind), lookups."""
    view = PlanView(plan)
    plan = view.plan
    programs = []
    for (stage, kind), gm in build_graphs(view).items():
        name = f"stage{stage}_{kind}"
        ops = view.program(stage, kind)
        doc = f"The {kind} round of pipeline stage {stage}: {_describe(view, ops)}."
        inputs = [n.name for n in gm.graph.nodes if n.op == "placeholder"][len(PARAMS):]
        programs.append({"stage": stage, "kind": kind, "name": name, "inputs": repr(tuple(inputs)),
                         "source": function_source(gm, name, doc)})
    env = jinja2.Environment(loader=jinja2.PackageLoader("specplan.lower", "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    return env.get_template("runtime_module.py.j2").render(
        plan=plan, module=module_name(plan), programs=programs, steps=STEPS, literal=_literal,
        families=[f.name for f in plan.families], boundaries=encode(plan.boundaries),
        relays=encode(plan.relays))


def _describe(view: PlanView, ops: list[Step]) -> str:
    if not ops:
        return "no collective"
    parts = []
    for step in ops:
        if step[0] == "boundary":
            parts.append(f"boundary {step[1]} ({view.boundaries[step[1]].label})")
        else:
            parts.append(f"relay {step[1]}" if step[0] == "relay" else "the dp token counts")
    return ", ".join(parts)


def _literal(obj: object) -> str:
    return pprint.pformat(obj, width=100, sort_dicts=False)


def write_runtime_module(plan: Plan, out_dir: str | Path) -> Path:
    """Write runtime_<name>.py atomically beside plan.json; returns its path."""
    return write_atomic(Path(out_dir) / f"{module_name(plan)}.py", render_module(plan))
