"""A spec's launch on several nodes: one self-contained line per node, in the engine's own
multi-node spelling (engines/<engine>/launch.py `NodeFlags`), SPECPLAN_PLAN in front of each.

`specplan export SPEC --nodes` writes them (a deployment: each instance with nodes > 1);
`specplan import` reads them back (nodes_import.py). `--format lws` writes the same lines as a
Kubernetes LeaderWorkerSet (lws.py).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from specplan.ecosystem.export import Launch, _quote

HEAD_PLACEHOLDER = "HEAD_ADDR"  # the head node's address, a shell variable the operator sets
MARK = "# specplan export: "  # the first line of export's output
PER_NODE = "one line per node"  # ... and what it says of per-node lines


class NodeRefusal(ValueError):
    """The options ask for per-node lines the engine does not write (exit 2)."""


@dataclass(frozen=True)
class NodeOptions:
    """`executor`: the engine's executor across nodes (None: its default); `head`: the head
    node's address (host, or host:port; None: "$HEAD_ADDR"); `fmt`: script | lws."""

    executor: str | None = None
    head: str | None = None
    fmt: str = "script"


@dataclass
class NodeLine:
    node: int
    env: list[tuple[str, str]]  # VAR=value words in front of the engine (SPECPLAN_PLAN first)
    words: list[str]  # the program's words and its arguments; empty: only `ray start`
    ray: list[str]  # the `ray start` words run before it (Ray only)
    comment: str
    note: str = ""  # said at the end of the line


def table(engine: str):
    from specplan.engines import convention

    return convention(engine).launch.nodes


def executor_of(engine: str, options: NodeOptions) -> str:
    nodes = table(engine)
    chosen = options.executor or nodes.executors[0]
    if chosen not in nodes.executors:
        from specplan.engines import convention

        raise NodeRefusal(f"--executor {chosen}: specplan writes {convention(engine).title}'s "
                          f"lines across nodes for {' | '.join(nodes.executors)}")
    return chosen


def node_lines(launch: Launch, nnodes: int, dp: int, options: NodeOptions,
               kept: list[str] | None = None) -> list[NodeLine]:
    """One NodeLine per node of `launch` (export()'s, for a spec of `nnodes` nodes and `dp`
    replicas); `kept`: the arguments an imported spec keeps as written."""
    from specplan.engines import convention

    nodes, executor = table(launch.engine), executor_of(launch.engine, options)
    head = options.head or "$" + HEAD_PLACEHOLDER
    program = shlex.split(launch.program or convention(launch.engine).launch.program)
    common = [(f, v) for f, v, _ in launch.args if f != "--nnodes"]
    common += [(a, None) for a in kept or [] if not _node_flag(a, launch.engine)]
    env = ([("SPECPLAN_PLAN", launch.plan_path)] if launch.plan_path else []) + \
        [(name, value) for name, value, _ in launch.env]
    plan_only = env[:1] if launch.plan_path else []
    out = []
    for node in range(nnodes):
        rows = [(f, v) for f, v, _ in nodes.write(executor, node, nnodes, head, dp)
                if nnodes > 1 or executor == nodes.ray]  # one node: the engine's own default
        words = program + _words(common + rows)
        ray = nodes.ray_start(node, head) if executor == nodes.ray else []
        what = "the head" if node == 0 else ("joins the head's Ray cluster" if ray else
                                             "joins the head")
        line = NodeLine(node, env, words, ray, f"node {node} of {nnodes} ({what})")
        if ray and node:
            line.env, line.words = plan_only, []
        if ray and node == 0 and launch.plan_path:
            line.note = nodes.ray_note
        out.append(line)
    return out


def _node_flag(arg: str, engine: str) -> bool:
    """Whether a kept argument is one the node rows write (an imported line's own)."""
    from specplan.engines import convention

    flag = arg.split(" ")[0].partition("=")[0]
    option = convention(engine).flag_table().options.get(flag)
    dests = table(engine).dests | {"nnodes"} | table(engine).ray_dests
    return option is not None and option.dest in dests


def _words(rows: list[tuple[str, str | None]]) -> list[str]:
    out: list[str] = []
    for flag, value in rows:
        out += shlex.split(flag) if value is None and " " in flag else [flag]
        if value is not None:
            out.append(value)
    return out


def _shell(word: str) -> str:
    """A word as the shell reads it back: specplan's placeholders stay variables."""
    if "$" + HEAD_PLACEHOLDER in word:
        return f'"{word}"'
    return _quote(word)


def render_line(line: NodeLine) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in line.env)
    parts = []
    if line.ray:
        parts.append(" ".join(filter(None, [env if not line.words else "",
                                            " ".join(_shell(w) for w in line.ray)])))
    if line.words:
        parts.append(" ".join(filter(None, [env, " ".join(_shell(w) for w in line.words)])))
    text = " && ".join(parts)
    return text + (f"  # {line.note}" if line.note else "")


def render_nodes(launch: Launch, lines: list[NodeLine], options: NodeOptions) -> str:
    """The script: export's header and notes, then a comment and a line per node."""
    executor = executor_of(launch.engine, options)
    out = [f"{MARK}{launch.title}: {PER_NODE} ({len(lines)} node{'s' if len(lines) > 1 else ''}, executor "
           f"{executor})"]
    out += [f"# note: {n}" for n in launch.notes]
    if not options.head:
        out.append(f"# {HEAD_PLACEHOLDER}: set it to the head node's (node 0's) address, "
                   "reachable from every node")
    if launch.plan_path:
        out.append(f"# SPECPLAN_PLAN: `{launch.plan_how}` writes it; copy it to the same path "
                   "on every node")
    for line in lines:
        out += [f"# {line.comment}", render_line(line)]
    return "\n".join(out) + "\n"

