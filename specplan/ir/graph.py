"""StageGraph: the round as a networkx DAG of Nodes (the plan-level facts are the draft, ir/draft.py).

networkx stays inside ir/: passes use this class's methods, never the DiGraph itself.
"""

from __future__ import annotations

from typing import Iterator

import networkx as nx

from specplan.ir.nodes import KINDS, ROUNDS, Kind, Node

ROUND_ORDER = {r: i for i, r in enumerate(ROUNDS)}


class StageGraph:
    def __init__(self) -> None:
        self._g = nx.DiGraph()
        self.passes_run: list[str] = []

    # -- building -----------------------------------------------------------------------
    def add(self, node: Node) -> Node:
        assert node.id not in self._g, f"duplicate node {node.id}"
        self._g.add_node(node.id, node=node)
        return node

    def replace(self, node: Node) -> None:
        assert node.id in self._g, f"no node {node.id}"
        self._g.nodes[node.id]["node"] = node

    def connect(self, src: Node | str, dst: Node | str, carries: tuple[str, ...] = (),
                kind: str = "data") -> None:
        a, b = _id(src), _id(dst)
        assert a in self._g and b in self._g, f"edge {a} -> {b} names a missing node"
        if self._g.has_edge(a, b):
            old = self._g.edges[a, b]
            self._g.edges[a, b]["carries"] = tuple(dict.fromkeys(old["carries"] + carries))
            return
        self._g.add_edge(a, b, carries=carries, kind=kind)

    def disconnect(self, src: Node | str, dst: Node | str) -> tuple[str, ...]:
        a, b = _id(src), _id(dst)
        carries = self._g.edges[a, b]["carries"]
        self._g.remove_edge(a, b)
        return carries

    # -- reading ------------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        return self._g.nodes[node_id]["node"]

    def has(self, node_id: str) -> bool:
        return node_id in self._g

    def nodes(self, kind: Kind | None = None, round: str | None = None,
              stage: int | None = None) -> list[Node]:
        out = [d["node"] for _, d in self._g.nodes(data=True)]
        out = [n for n in out if (kind is None or n.kind == kind) and
               (round is None or n.round == round) and (stage is None or n.stage == stage)]
        return sorted(out, key=self._sort_key)

    def edges(self) -> Iterator[tuple[Node, Node, dict]]:
        for a, b, data in sorted(self._g.edges(data=True)):
            yield self.get(a), self.get(b), data

    def successors(self, node: Node | str) -> list[Node]:
        return sorted((self.get(n) for n in self._g.successors(_id(node))), key=self._sort_key)

    def predecessors(self, node: Node | str) -> list[Node]:
        return sorted((self.get(n) for n in self._g.predecessors(_id(node))), key=self._sort_key)

    def edge(self, src: Node | str, dst: Node | str) -> dict:
        return self._g.edges[_id(src), _id(dst)]

    def path(self, src: Node | str, dst: Node | str) -> list[Node] | None:
        """A shortest dependency path from src to dst, or None when dst does not depend on src."""
        try:
            return [self.get(n) for n in nx.shortest_path(self._g, _id(src), _id(dst))]
        except nx.NetworkXNoPath:
            return None

    def is_acyclic(self) -> bool:
        return nx.is_directed_acyclic_graph(self._g)

    def cycle(self) -> list[str]:
        try:
            return [a for a, _ in nx.find_cycle(self._g)]
        except nx.NetworkXNoCycle:
            return []

    def topological(self) -> list[Node]:
        """Nodes in dependency order, ties broken by (round, stage, order, kind, name)."""
        order = nx.lexicographical_topological_sort(self._g, key=lambda n: self._sort_key(self.get(n)))
        return [self.get(n) for n in order]

    def __len__(self) -> int:
        return self._g.number_of_nodes()

    @staticmethod
    def _sort_key(n: Node) -> tuple:
        return (ROUND_ORDER[n.round], n.attr("order", 0), KINDS.index(n.kind), n.stage, n.name)


def _id(x: Node | str) -> str:
    return x if isinstance(x, str) else x.id
