"""The rules of updating an executable graph (cudaGraphExecUpdate), checked before anything changes.

Nodes of the two graphs are paired in creation order (the same code captured or built again creates them
in the same order). The update is refused, naming the node of the new graph and the rule, when:

* the node count differs, or a paired node depends on other nodes ("topology changed");
* a paired node is of another kind ("node kind changed");
* a copy's source or destination moves between host and device memory ("memory kind changed");
* a copy's or memset's device memory is on another device ("device changed");
* the graph holds allocation or free nodes, whose fixed addresses an update cannot move
  ("unsupported node kind");
* a child graph breaks any of these rules inside it.

Kernel nodes may change function, launch shape and arguments; host nodes their callable and arguments;
event nodes their event; memsets their value and size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._errors import GraphUpdateError
from ._nodes import MEMORY_KINDS, ChildGraphParams, MemcpyParams, MemsetParams, NodeKind


class GraphLayout:
    """What an update compares: a graph's nodes in creation order, their kinds, dependencies and parameters."""

    __slots__ = ("nodes", "index", "kinds", "deps", "params", "children")

    def __init__(self, graph: Any, handles: list[Any] | None = None, edges: list[Any] | None = None) -> None:
        """Read ``graph`` now, or as it was when ``handles`` and ``edges`` (backend handles) were taken:
        nodes' parameters never change once added, so nodes and edges are all a snapshot needs."""
        backend = graph._backend
        handles = backend.graph_nodes(graph._handle) if handles is None else handles
        edges = backend.graph_edges(graph._handle) if edges is None else edges
        self.nodes = [graph._node(h) for h in handles]
        self.index = {node: i for i, node in enumerate(self.nodes)}
        position = {h: i for i, h in enumerate(handles)}
        self.kinds = [node.kind for node in self.nodes]
        deps: list[set[int]] = [set() for _ in self.nodes]
        for source, target in edges:  # one query for the whole graph
            deps[position[target]].add(position[source])
        self.deps = [frozenset(d) for d in deps]
        self.params = [node.params for node in self.nodes]
        self.children = {i: GraphLayout(p.graph) for i, p in enumerate(self.params)
                         if isinstance(p, ChildGraphParams)}

    def __len__(self) -> int:
        return len(self.nodes)

    def shape(self) -> tuple[int, list[tuple[int, int]]]:
        """The node count and the edges as (target, source) positions, sorted: see ``graph_shape``."""
        return len(self.nodes), sorted((t, s) for t, deps in enumerate(self.deps) for s in deps)


def graph_shape(graph: Any) -> tuple[int, list[tuple[int, int]]]:
    """A graph's topology with nodes named by creation order: its node count and its edges as sorted
    (target, source) positions. Two graphs pair node for node in creation order exactly when their shapes
    are equal; it is cheaper than a GraphLayout (no Node objects, no parameters)."""
    backend, handle = graph._backend, graph._handle
    nodes = backend.graph_nodes(handle)
    position = {h: i for i, h in enumerate(nodes)}
    return len(nodes), sorted([(position[t], position[s]) for s, t in backend.graph_edges(handle)])


def _memory_kind(operand: Any) -> str:
    return "host" if isinstance(operand, np.ndarray) else "device"


def _device(operand: Any) -> Any:
    return getattr(operand, "device", None)


def check_node(old: Any, new: Any, node: Any) -> None:
    """Refuse parameters ``new`` in place of ``old`` on one node (setters and whole-graph update)."""
    if isinstance(old, MemcpyParams):
        for side in ("dst", "src"):
            was, now = getattr(old, side), getattr(new, side)
            if _memory_kind(was) != _memory_kind(now):
                raise GraphUpdateError("memory kind changed", node,
                                       f"{side} was {_memory_kind(was)} memory, got {_memory_kind(now)} memory")
            if _memory_kind(now) == "device" and _device(was) is not _device(now):
                raise GraphUpdateError("device changed", node, f"{side} was on {_device(was)}, got {_device(now)}")
    elif isinstance(old, MemsetParams) and _device(old.dst) is not _device(new.dst):
        raise GraphUpdateError("device changed", node, f"dst was on {_device(old.dst)}, got {_device(new.dst)}")


def check_update(old: GraphLayout, new: GraphLayout) -> None:
    """Raise GraphUpdateError naming the first node of ``new`` that breaks a rule (module docstring)."""
    if len(old) != len(new):
        raise GraphUpdateError("topology changed", None,
                               f"the new graph has {len(new)} nodes, the executable graph {len(old)}")
    for i, node in enumerate(new.nodes):
        was, now = old.kinds[i], new.kinds[i]
        if was is not now:
            raise GraphUpdateError("node kind changed", node, f"the paired node is a {was.value} node, "
                                                              f"got a {now.value} node")
        if now in MEMORY_KINDS:
            raise GraphUpdateError("unsupported node kind", node, "allocation and free nodes cannot be "
                                                                  "updated; instantiate the new graph instead")
        if old.deps[i] != new.deps[i]:
            names = lambda layout, deps: ", ".join(repr(layout.nodes[d]) for d in sorted(deps)) or "nothing"  # noqa: E731
            raise GraphUpdateError("topology changed", node, f"it depends on {names(new, new.deps[i])}; the "
                                                             f"paired node depends on {names(old, old.deps[i])}")
        check_node(old.params[i], new.params[i], node)
        if now is NodeKind.GRAPH:
            check_update(old.children[i], new.children[i])
