"""The CPU backend's native graph: a plain Python DAG of nodes holding parameter records."""

from __future__ import annotations

from typing import Any, Sequence

from ..._nodes import ChildGraphParams


class CpuNode:
    """A node: its parameters and its edges in both directions."""

    __slots__ = ("params", "deps", "dependents", "alloc", "__weakref__")

    def __init__(self, params: Any, deps: Sequence["CpuNode"], alloc: Any = None) -> None:
        self.params = params
        self.deps: list[CpuNode] = list(deps)
        self.dependents: list[CpuNode] = []
        self.alloc = alloc  # the Allocation of an alloc or free node
        for dep in self.deps:
            dep.dependents.append(self)


class CpuGraph:
    """A graph: nodes in the order they were added."""

    __slots__ = ("index", "nodes", "clone_of", "__weakref__")

    def __init__(self, index: int) -> None:
        self.index = index
        self.nodes: list[CpuNode] = []
        self.clone_of: dict[CpuNode, CpuNode] = {}  # original node -> node of this clone

    def add(self, params: Any, deps: Sequence[CpuNode], alloc: Any = None) -> CpuNode:
        if isinstance(params, ChildGraphParams):
            # Like CUDA, the node embeds a copy of the child graph taken now.
            params = ChildGraphParams(params.graph.clone())
        node = CpuNode(params, deps, alloc)
        self.nodes.append(node)
        return node

    def edges(self) -> list[tuple[CpuNode, CpuNode]]:
        return [(dep, node) for node in self.nodes for dep in node.deps]

    def clone(self) -> "CpuGraph":
        copy = CpuGraph(self.index)
        mapping: dict[CpuNode, CpuNode] = {}
        for node in self.nodes:
            params = node.params
            if isinstance(params, ChildGraphParams):
                params = ChildGraphParams(params.graph.clone())
            mapping[node] = CpuNode(params, (), node.alloc)
            copy.nodes.append(mapping[node])
        # Edges are wired after every node exists: add_dependency may point from a later node to an earlier one.
        for node in self.nodes:
            new = mapping[node]
            new.deps = [mapping[d] for d in node.deps]
            new.dependents = [mapping[d] for d in node.dependents]
        copy.clone_of = mapping
        return copy
