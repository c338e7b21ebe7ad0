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

    def __init__(self, graph: Any) -> None:
        """``graph`` as it is now (a snapshot: later changes to it do not show)."""
        self.nodes = list(graph._current().values())
        self.index = {node: i for i, node in enumerate(self.nodes)}
        self.kinds = [node.kind for node in self.nodes]
        self.deps = [frozenset(dep._index for dep in node._deps) for node in self.nodes]
        self.params = [node.params for node in self.nodes]
        self.children = {i: GraphLayout(p.graph) for i, p in enumerate(self.params)
                         if isinstance(p, ChildGraphParams)}

    def __len__(self) -> int:
        return len(self.nodes)

    def shape(self) -> tuple[Any, ...]:
        """Each node's dependencies as sorted positions: see ``graph_shape``."""
        return tuple(tuple(sorted(deps)) for deps in self.deps)


def graph_shape(graph: Any) -> tuple[Any, ...]:
    """A graph's topology with nodes named by creation order: each node's dependencies as sorted positions.
    Two graphs pair node for node in creation order exactly when their shapes are equal; it is cheaper than a
    GraphLayout (no parameters), and kept until the graph changes."""
    nodes = graph._current()
    cached = graph._shape
    if cached is not None and cached[0] == graph._version and not graph._recording:
        return cached[1]
    shape = tuple(tuple(sorted([dep._index for dep in node._deps])) for node in nodes.values())
    graph._shape = (graph._version, shape)
    return shape


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
