"""A graph's topology as gpugraph keeps it: its nodes in creation order, their parameter and allocation
records, and its edges, as lists indexed by position.

``Graph`` owns one and keeps it as nodes and edges are added; what a capture recorded is read from the
backend once (``Topology.read``). Positions, not objects, name the nodes here: nothing in a Topology
points back at its Graph, so a graph nobody holds is freed at once, not left to the cycle collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ._nodes import MEMORY_KINDS


class Topology:
    """Nodes by position in creation order; ``deps[i]`` and ``dependents[i]`` are positions."""

    __slots__ = ("handles", "position", "records", "numbers", "deps", "dependents", "allocs", "memory", "_shape")

    def __init__(self) -> None:
        self.handles: list[Any] = []  # backend node handles
        self.position: dict[Any, int] = {}  # handle -> position
        # The parameter record the backend was given or reported (parameters never change once added); for
        # a child-graph node, ChildGraphParams of the backend graph the node embeds.
        self.records: list[Any] = []
        self.numbers: list[int] = []  # each node's name (n0, n1, ...), for good, whatever is removed before it
        self.deps: list[list[int]] = []
        self.dependents: list[list[int]] = []
        self.allocs: dict[int, Any] = {}  # allocation and free nodes' allocation records (the backend's)
        self.memory = False  # whether any node allocates or frees
        self._shape: tuple[tuple[int, ...], ...] | None = None  # shape(), until the topology changes

    def __len__(self) -> int:
        return len(self.handles)

    def add(self, handle: Any, record: Any, deps: Iterable[int], number: int, alloc: Any = None) -> int:
        """Note a node after ``deps``; return its position."""
        i = len(self.handles)
        self._shape = None
        self.handles.append(handle)
        self.position[handle] = i
        self.records.append(record)
        self.numbers.append(number)
        self.deps.append(list(deps))
        self.dependents.append([])
        for dep in self.deps[i]:
            self.dependents[dep].append(i)
        if record.kind in MEMORY_KINDS:
            self.memory = True
            if alloc is not None:
                self.allocs[i] = alloc
        return i

    def add_edge(self, source: int, target: int) -> None:
        self._shape = None
        self.deps[target].append(source)
        self.dependents[source].append(target)

    def remove_edge(self, source: int, target: int) -> None:
        self._shape = None
        self.deps[target].remove(source)
        self.dependents[source].remove(target)

    def reaches(self, source: int, targets: Iterable[int]) -> bool:
        """Whether any of ``targets`` is ``source`` or depends on it, directly or not."""
        pending, seen = list(targets), set()
        while pending:
            i = pending.pop()
            if i == source:
                return True
            if i not in seen:
                seen.add(i)
                pending.extend(self.deps[i])
        return False

    def shape(self) -> tuple[tuple[int, ...], ...]:
        """Each node's dependencies as sorted positions: two graphs pair node for node in creation order
        exactly when their shapes are equal."""
        if self._shape is None:
            self._shape = tuple(tuple(sorted(deps)) for deps in self.deps)
        return self._shape

    @classmethod
    def read(cls, backend: Any, graph: Any, known: Topology, number: Callable[[Any], int]) -> Topology:
        """The backend graph ``graph`` as it is now: one listing of its nodes and one of its edges. Records of
        nodes ``known`` holds are taken from it; the backend is asked for the others' records, and
        ``number(handle)`` names them."""
        topology = cls()
        for handle in backend.graph_nodes(graph):
            i = known.position.get(handle)
            if i is None:
                record = backend.node_params(graph, handle)
                alloc = backend.node_allocation(graph, handle) if record.kind in MEMORY_KINDS else None
                topology.add(handle, record, (), number(handle), alloc)
            else:
                topology.add(handle, known.records[i], (), known.numbers[i], known.allocs.get(i))
        position = topology.position
        for source, target in backend.graph_edges(graph):
            topology.add_edge(position[source], position[target])
        return topology
