"""The rules of updating an executable graph (cudaGraphExecUpdate), checked before anything changes.

Nodes of the two graphs are paired in creation order (the same code captured or built again creates them
in the same order). The update is refused, naming the node of the new graph and the rule, when:

* the node count differs, or a paired node depends on other nodes ("topology changed");
* a paired node is of another kind ("node kind changed");
* a copy's source or destination moves between host and device memory ("memory kind changed");
* a copy's or memset's device memory is on another device, or a kernel runs on another device ("device
  changed");
* the graph holds allocation or free nodes, whose fixed addresses an update cannot move
  ("unsupported node kind");
* a conditional node changes type or body count ("parameters changed");
* a kernel node changes whether it is cooperative, or its priority where the executable graph was
  instantiated with use_node_priority ("attributes changed");
* a child graph or a conditional node's body breaks any of these rules inside it.

Kernel nodes may change function, launch shape and arguments; host nodes their callable and arguments;
event nodes their event; memsets their value and size.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from . import _graph_reads
from ._attributes import KernelAttributes
from ._errors import GraphUpdateError
from ._graph_reads import GraphFields
from ._memops import shape_of
from ._memory import address_of
from ._nodes import (
    MEMORY_KINDS,
    ConditionalParams,
    KernelParams,
    MemcpyParams,
    MemOpsParams,
    MemsetParams,
    NodeKind,
    SemaphoreSignalParams,
    SemaphoreWaitParams,
)


class GraphLayout:
    """What an update compares: a graph's nodes in creation order, their kinds, dependencies and parameters."""

    __slots__ = ("graph", "handles", "index", "numbers", "kinds", "deps", "params", "children", "bodies", "memory",
                 "_shape", "_attributes")

    def __init__(self, graph: GraphFields[Any]) -> None:
        """``graph`` as it is now (a snapshot: later changes to it do not show)."""
        topology = _graph_reads.topology(graph)
        self.graph = graph
        self.handles = list(topology.handles)
        self.index = dict(zip(self.handles, itertools.count()))  # node handle -> position
        # The nodes' numbers, which no later node takes (a backend may give a later node a removed one's handle).
        self.numbers = [topology.number(i) for i in range(len(self.handles))]
        self.params = list(topology.records)  # (a child graph's: the backend graph it embeds)
        self.kinds = [record.kind for record in self.params]
        self.deps = [frozenset(deps) for deps in topology.deps]
        self.children = {i: GraphLayout(_graph_reads.embedded_graphs(graph, self.handles[i])[0])
                         for i, kind in enumerate(self.kinds) if kind is NodeKind.GRAPH}
        self.bodies = {i: tuple(GraphLayout(body) for body in _graph_reads.embedded_graphs(graph, self.handles[i]))
                       for i, kind in enumerate(self.kinds) if kind is NodeKind.CONDITIONAL}
        self.memory = topology.memory  # whether any node allocates or frees
        self._shape = (topology.shape(), tuple(child.shape() for _, child in sorted(self.children.items())),
                       tuple(tuple(body.shape() for body in bodies) for _, bodies in sorted(self.bodies.items())))
        # Kernel nodes' attributes, by position, as the graph had them when the layout was taken: read when first
        # asked (the backend keeps them), or kept by ``keep_attributes`` before the graph changes them.
        self._attributes: dict[int, KernelAttributes] = {}

    def __len__(self) -> int:
        return len(self.handles)

    def node(self, i: int) -> Any:
        """The Node at position ``i`` (for messages: Node objects are made only when named)."""
        return _graph_reads.node_of(self.graph, self.handles[i])

    def shape(self) -> tuple[Any, ...]:
        """The graph's shape (``_graph_reads.shape``) when the layout was taken."""
        return self._shape

    def attributes(self, i: int) -> KernelAttributes:
        """The attributes of the kernel node at position ``i`` when the layout was taken."""
        attributes = self._attributes.get(i)
        if attributes is None:
            graph = self.graph  # (the backend keeps them: read by the graph's and the node's backend handles)
            backend = _graph_reads.backend(graph)
            attributes = self._attributes[i] = backend.node_attributes(_graph_reads.handle(graph), self.handles[i])
        return attributes

    def keep_attributes(self, graph: GraphFields[Any], handle: Any, attributes: KernelAttributes) -> None:
        """Kernel node ``handle`` of ``graph`` (the layout's graph, or one of its child graphs or bodies) is about
        to take other attributes than ``attributes``: the layout keeps those, unless it has them already."""
        if graph is self.graph:
            i = self.index.get(handle)
            if i is not None:
                self._attributes.setdefault(i, attributes)
            return
        for inner in itertools.chain(self.children.values(), *self.bodies.values()):
            inner.keep_attributes(graph, handle, attributes)


def attribute_refusal(old: KernelAttributes, new: KernelAttributes, node_priority: bool) -> str | None:
    """Why a kernel node of an executable graph cannot go from attributes ``old`` to ``new`` in an update, or None:
    it keeps whether it is cooperative, and its priority where the executable graph was instantiated with
    use_node_priority (``node_priority``); it takes the other attributes."""
    if old.cooperative != new.cooperative:
        return (f"cooperative was {old.cooperative}, got {new.cooperative}: an executable graph's kernel node keeps "
                f"whether it is cooperative (CUDA's rule); instantiate the new graph instead")
    if node_priority and old.priority != new.priority:
        return (f"priority was {old.priority}, got {new.priority}: an executable graph instantiated with "
                f"use_node_priority keeps its kernel nodes' priorities (CUDA's rule); instantiate the new graph "
                f"instead")
    return None


def _memory_kind(operand: Any) -> str:
    return "host" if isinstance(operand, np.ndarray) else "device"


def _device(operand: Any) -> Any:
    return getattr(operand, "device", None)


def _copy_words(p: MemcpyParams) -> str:
    where = f"from {address_of(p.src):#x} to {address_of(p.dst):#x}"
    if p.box is None:
        return f"a 1-D copy of {p.nbytes} bytes {where}"
    return f"extent {p.box.extent} (bytes, rows, slices) {where}, at {p.box.src_at} and {p.box.dst_at}"


def _rows(box: Any) -> bool:
    """Whether a copy's box has more than one row: one of a single row the driver takes as a 1-D copy, which an
    executable graph changes freely (its start, its size, to and from 1-D: measured on the H200, driver 580)."""
    return box is not None and (box.extent[1] > 1 or box.extent[2] > 1)


def _plane(p: MemsetParams) -> tuple[int, int, int, int]:
    return p.height, p.count, p.element_size, p.pitch


def node_refusal(old: Any, new: Any) -> tuple[str, str] | None:
    """Why parameters ``new`` cannot replace ``old`` on one node (setters and whole-graph update): (the rule,
    the detail), or None."""
    if isinstance(old, MemcpyParams):
        for side in ("dst", "src"):
            was, now = getattr(old, side), getattr(new, side)
            if _memory_kind(was) != _memory_kind(now):
                return "memory kind changed", f"{side} was {_memory_kind(was)} memory, got {_memory_kind(now)} memory"
            if _memory_kind(now) == "device" and _device(was) is not _device(now):
                return "device changed", f"{side} was on {_device(was)}, got {_device(now)}"
        if (_rows(old.box) or _rows(new.box)) and (old.box, address_of(old.dst), address_of(old.src)) != (
                new.box, address_of(new.dst), address_of(new.src)):
            return "parameters changed", (f"an executable graph's copy of several rows cannot change (CUDA's "
                                          f"rule, measured): it was {_copy_words(old)}, got {_copy_words(new)}")
    elif isinstance(old, MemsetParams):
        if _device(old.dst) is not _device(new.dst):
            return "device changed", f"dst was on {_device(old.dst)}, got {_device(new.dst)}"
        if max(old.height, new.height) > 1 and _plane(old) != _plane(new):
            return "parameters changed", (f"a 2-D memset keeps its shape, and a 1-D one stays 1-D (CUDA's rule, "
                                          f"measured): it was {_plane(old)}, got {_plane(new)} (rows, elements a "
                                          f"row, element size, pitch)")
    elif isinstance(old, KernelParams) and old.device != new.device:  # (a function's context cannot change)
        return "device changed", f"the kernel ran on device {old.device}, got one on device {new.device}"
    elif isinstance(old, ConditionalParams) and (old.type, len(old.bodies)) != (new.type, len(new.bodies)):
        return "parameters changed", (f"the conditional node was {old.type} with {len(old.bodies)} bodies, got "
                                      f"{new.type} with {len(new.bodies)}")
    # (The kinds added last are tested last: kernel nodes' setters, a hot path, pass fewer tests.)
    elif isinstance(old, (SemaphoreSignalParams, SemaphoreWaitParams)) and len(old.semaphores) != len(new.semaphores):
        return "parameters changed", (f"an executable graph's semaphore node keeps its number of semaphores (CUDA's "
                                      f"rule, measured): it had {len(old.semaphores)}, got {len(new.semaphores)}")
    elif isinstance(old, MemOpsParams) and shape_of(old) != shape_of(new):
        return "parameters changed", (f"an executable graph's batch memory-op node keeps the kind and width of each "
                                      f"operation (CUDA's rule, measured): it had {shape_of(old)}, got {shape_of(new)}")
    return None


def check_update(old: GraphLayout, new: GraphLayout, attributes: bool = False, node_priority: bool = False,
                 within: tuple[Any, str] | None = None) -> None:
    """Raise GraphUpdateError naming the first node of ``new`` that breaks a rule (module docstring).

    ``attributes``: compare kernel nodes' attributes too, as an update does (``attribute_refusal``, with
    ``node_priority``). ``within``: (the node of the new graph, and what ``new`` is of it: "its body 0") when
    ``new`` is a child graph or a body, which a different node count names."""
    if len(old) != len(new):
        count = f"{len(new)} node" + ("s" if len(new) != 1 else "")
        if within is None:
            raise GraphUpdateError("topology changed", None, f"the new graph has {count}, the executable graph "
                                                             f"{len(old)}")
        raise GraphUpdateError("topology changed", within[0], f"{within[1]} has {count}, the executable graph's "
                                                              f"{len(old)}")
    for i, now in enumerate(new.kinds):  # (Node objects are made only to name one in an error)
        was = old.kinds[i]
        if was is not now:
            raise GraphUpdateError("node kind changed", new.node(i), f"the paired node is a {was.value} node, "
                                                                     f"got a {now.value} node")
        if now in MEMORY_KINDS:
            raise GraphUpdateError("unsupported node kind", new.node(i), "allocation and free nodes cannot be "
                                                                         "updated; instantiate the new graph instead")
        if old.deps[i] != new.deps[i]:
            names = lambda layout, deps: ", ".join(repr(layout.node(d)) for d in sorted(deps)) or "nothing"  # noqa: E731
            raise GraphUpdateError("topology changed", new.node(i),
                                   f"it depends on {names(new, new.deps[i])}; the paired node depends on "
                                   f"{names(old, old.deps[i])}")
        refusal = node_refusal(old.params[i], new.params[i])
        if refusal is not None:
            raise GraphUpdateError(refusal[0], new.node(i), refusal[1])
        if now is NodeKind.KERNEL and attributes:
            detail = attribute_refusal(old.attributes(i), new.attributes(i), node_priority)
            if detail is not None:
                raise GraphUpdateError("attributes changed", new.node(i), detail)
        elif now is NodeKind.GRAPH:
            check_update(old.children[i], new.children[i], attributes, node_priority, (new.node(i), "its child graph"))
        elif now is NodeKind.CONDITIONAL:
            for b, (was_body, body) in enumerate(zip(old.bodies[i], new.bodies[i])):
                check_update(was_body, body, attributes, node_priority, (new.node(i), f"its body {b}"))
