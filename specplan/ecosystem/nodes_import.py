"""`specplan import` of one deployment's per-node lines (nodes.py writes them): every line is
read, the lines must agree (node count, node ranks, every width and flag, the plan), and the
head's line, less what differs per node, is the one the spec is imported from.

A disagreement is an ImportProblem naming the line and the field: `FILE:LINE: node R: FIELD:
expected X (as LINE H, node 0), found Y`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from specplan.ecosystem.launch_import import ImportProblem, split_command
from specplan.ecosystem.shell import _script_lines, assigns_only
from specplan.ecosystem.nodes import table

PLAN = "SPECPLAN_PLAN"


@dataclass
class Read:
    """One node's line as written: its env words, engine arguments and `ray start` words."""

    at: str  # where in the file: the script's line number, or the manifest's template
    label: str  # how other messages name it: "line 6", the template's path
    env: dict[str, str] = field(default_factory=dict)
    env_words: list[str] = field(default_factory=list)
    program: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)  # the engine's arguments
    ray: list[str] = field(default_factory=list)  # `ray start ...`
    values: dict = field(default_factory=dict)  # dest -> value of `words`
    args: list = field(default_factory=list)
    node: int = -1

    @property
    def runs_engine(self) -> bool:
        return bool(self.program)


def per_node(text: str) -> bool:
    """Whether a script holds several launch lines (or a Ray cluster's, or says it is export's
    per-node form), not one command."""
    from specplan.ecosystem.nodes import MARK, PER_NODE

    commands = [line for _, line in _script_lines(text) if _command(line)]
    head = re.sub(r"\n#   ", " ", text).partition("\n")[0]  # its first comment, wrapped or not
    own = head.startswith(MARK) and PER_NODE in head
    return "=(" not in text and (own or len(commands) > 1 or any("ray start" in c for c in commands))


def _command(line: str) -> bool:
    words = line.strip()
    return (bool(words) and not words.startswith(("#", "export ")) and words != ")"
            and not assigns_only(words))  # a shell variable set before the launch


def read_nodes(engine: str, text: str, where: str, version: str | None = None,
               env: dict[str, str] | None = None) -> tuple[dict[str, str], list[str], int]:
    """(env, argv, nodes) of the head's line, less what differs per node, after checking that
    the lines of `text` (file `where`) make one deployment; ImportProblem otherwise."""
    shared = dict(env or {})
    reads = []
    for number, line in _script_lines(text):
        if line.strip().startswith("export "):
            shared.update(w.partition("=")[::2] for w in shlex.split(line, comments=True)[1:]
                          if "=" in w)
        elif _command(line):
            reads.append(_read(engine, number, line, where, version))
    for r in reads:
        r.env = {**shared, **r.env}
    return Nodes(engine, reads, where).head_line()


def _read(engine: str, number: int, line: str, where: str, version: str | None) -> Read:
    try:
        words = shlex.split(line, comments=True)
    except ValueError as exc:
        raise ImportProblem(f"{where}:{number}: {str(exc).lower()}; expected a shell command "
                            "line") from None
    return read_words_of(engine, Read(str(number), f"line {number}"), words, where, version)


def read_words_of(engine: str, read: Read, words: list[str], where: str,
                  version: str | None = None) -> Read:
    """`read` filled from one node's words: `VAR=value` prefixes, `ray start`, the launch."""
    from specplan.ecosystem.argv import read_words
    from specplan.engines import convention
    from specplan.engines.flag_table import FlagProblem

    for command in _commands(words):
        env_words, program, rest = split_command(engine, command)
        read.env.update(w.partition("=")[::2] for w in env_words)
        if rest[:2] == ["ray", "start"] and not program:
            read.ray = rest
            continue
        if not program or read.program:
            raise ImportProblem(f"{where}:{read.at}: expected one {convention(engine).title} "
                                f"launch (`{convention(engine).launch.program} ...`) or `ray "
                                f"start`, found {shlex.join(command)!r}")
        read.env_words, read.program, read.words = env_words, program, rest
        try:
            read.args, read.values = read_words(convention(engine, version).flag_table(), rest)
        except FlagProblem as exc:
            raise ImportProblem(f"{where}:{read.at}: {exc}") from None
    return read


def _commands(words: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", ";"):
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


class Nodes:
    """The lines of one deployment, checked against each other."""

    def __init__(self, engine: str, reads: list[Read], where: str,
                 unit: str = "lines (one per node)"):
        self.engine, self.reads, self.where, self.unit = engine, reads, where, unit
        self.flags = table(engine)
        if not reads:
            raise ImportProblem(f"{where}: no launch line")

    def problem(self, read: Read, what: str, expected, found) -> ImportProblem:
        node = f"node {read.node}: " if read.node >= 0 else ""
        return ImportProblem(f"{self.where}:{read.at}: {node}{what}: expected {expected}, "
                             f"found {found}")

    def head_line(self) -> tuple[dict[str, str], list[str], int]:
        ray = any(r.ray for r in self.reads)
        head = self._ray_nodes() if ray else self._mp_nodes()
        self._agree(head)
        drop = self.flags.dests | (self.flags.ray_dests if ray else frozenset())
        words = [w for a in head.args if a.dest not in drop for w in a.words]
        if ray:
            words += ["--nnodes", str(len(self.reads))] if len(self.reads) > 1 else []
        return head.env, [*head.env_words, *head.program, *words], len(self.reads)

    def _int(self, read: Read, dest: str, default: int) -> int:
        value = read.values.get(dest, default)
        try:
            return int(value)
        except (TypeError, ValueError):
            raise self.problem(read, self._flag(dest), "an integer", _shown(value)) from None

    def _flag(self, dest: str) -> str:
        from specplan.engines import convention

        return convention(self.engine).flag_table().by_dest(dest).names[0]

    def _mp_nodes(self) -> Read:
        counts = {r.at: self._int(r, "nnodes", 1) for r in self.reads}
        first = self.reads[0]
        for r in self.reads:
            r.node = self._int(r, "node_rank", 0)
            if not r.runs_engine:
                raise self.problem(r, "the engine", f"a launch line, as {first.label}",
                                   "`ray start` only: Ray lines need the head's `ray start "
                                   "--head` line")
            if counts[r.at] != counts[first.at]:
                raise self.problem(r, "--nnodes", f"{counts[first.at]} ({first.label})",
                                   counts[r.at])
        n = counts[first.at]
        if n != len(self.reads):
            raise ImportProblem(f"{self.where}:{first.at}: node count: --nnodes {n}, "
                                f"found {len(self.reads)} {self.unit}")
        self._ranks()
        head = next(r for r in self.reads if r.node == 0)
        for r in self.reads:
            self._per_node_flags(r, n)
        return head

    def _ranks(self) -> None:
        seen: dict[int, Read] = {}
        for r in self.reads:
            if not 0 <= r.node < len(self.reads):
                raise self.problem(r, "--node-rank", f"0 to {len(self.reads) - 1}", r.node)
            if r.node in seen:
                raise self.problem(r, "--node-rank", f"a node of its own ("
                                   f"{seen[r.node].label} is node {r.node} too)", r.node)
            seen[r.node] = r

    def _per_node_flags(self, r: Read, n: int) -> None:
        """The flags that differ per node, as the engine's node table writes them."""
        from specplan.ecosystem.argv import read_words
        from specplan.engines import convention

        rows = self.flags.write("mp", r.node, n, "head")
        words = [w for f, v, _ in rows for w in ([f] if v is None else [f, v])]
        _, expected = read_words(convention(self.engine).flag_table(), words)
        for dest in self.flags.per_node:
            want, got = expected.get(dest), r.values.get(dest)
            if dest != "node_rank" and bool(want) != bool(got):
                raise self.problem(r, self._flag(dest), "present" if want else "absent",
                                   "present" if got else "absent")

    def _ray_nodes(self) -> Read:
        heads = [r for r in self.reads if r.runs_engine]
        if len(heads) != 1 or "--head" not in heads[0].ray:
            where = heads[1] if len(heads) > 1 else self.reads[0]
            raise self.problem(where, "the Ray head", "one line of `ray start --head && "
                               "... launch`, the others `ray start --address=HEAD --block`",
                               f"{len(heads)} launch lines" if heads else "none")
        head = heads[0]
        head.node = 0
        others = [r for r in self.reads if r is not head]
        for i, r in enumerate(others, 1):
            r.node = i
            if "--head" in r.ray or not any(w.startswith("--address") for w in r.ray):
                raise self.problem(r, "ray start", "--address=HEAD:PORT (join the head)",
                                   shlex.join(r.ray) or "no `ray start`")
        backend = head.values.get("distributed_executor_backend")
        if self.flags.ray is None or backend != self.flags.ray:
            raise self.problem(head, "--distributed-executor-backend", self.flags.ray, _shown(backend))
        if self._int(head, "nnodes", 1) != 1:
            raise self.problem(head, "--nnodes", "none under Ray (the Ray cluster spans the "
                               "nodes)", head.values["nnodes"])
        return head

    def _agree(self, head: Read) -> None:
        """Every line as the head's: the plan, the engine's environment, every other flag."""
        for r in self.reads:
            if r.env.get(PLAN) != head.env.get(PLAN):
                raise self.problem(r, PLAN, _shown(head.env.get(PLAN), head),
                                   _shown(r.env.get(PLAN)))
            if not r.runs_engine or r is head:
                continue
            for name in sorted(set(head.env) | set(r.env)):
                if head.env.get(name) != r.env.get(name) and name != PLAN:
                    raise self.problem(r, name, _shown(head.env.get(name), head),
                                       _shown(r.env.get(name)))
            for dest in sorted(set(head.values) | set(r.values), key=str):
                if dest in self.flags.per_node:
                    continue
                if head.values.get(dest) != r.values.get(dest):
                    raise self.problem(r, self._flag(dest) if dest != "model_tag" else "the model",
                                       _shown(head.values.get(dest), head),
                                       _shown(r.values.get(dest)))


def _shown(value, head: Read | None = None) -> str:
    text = "unset" if value is None else shlex.quote(str(value)) if isinstance(value, str) else \
        str(value)
    return f"{text} (as {head.label}, node 0)" if head is not None else text
