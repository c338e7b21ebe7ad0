"""The CPU backend's native graph: a plain Python DAG of nodes holding parameter records."""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._attributes import DEFAULT_ATTRIBUTES
from ..._host_threads import HOST_THREADS
from ..._nodes import AllocParams, ChildGraphParams, ConditionalParams, FreeParams, NodeKind
from ..._update import attribute_refusal, node_refusal
from ._memory import span

# Condition handles: unique in the process, so that a stale one names no live condition; never 0.
_condition_handles = itertools.count(1)


class CpuCondition:
    """A condition's value (``cell[0]``), which kernels set through its ``handle`` (gpugraph_cpu.h's
    cudaGraphSetConditional, which finds the handle among the conditions of the graph it runs in), and the value it
    takes at each launch when ``reset``."""

    __slots__ = ("cell", "default", "reset", "handle")

    def __init__(self, default: int, reset: bool) -> None:
        self.cell = np.array([default], dtype=np.uint32)
        self.default = default
        self.reset = reset
        self.handle = next(_condition_handles)


def copied(params: Any) -> Any:
    """``params`` as a node that embeds graphs keeps them: a child graph's copy, a conditional node's bodies'
    copies (a graph's nodes own their graphs)."""
    if isinstance(params, ChildGraphParams):
        return ChildGraphParams(params.graph.clone())
    if isinstance(params, ConditionalParams):
        return ConditionalParams(params.type, params.condition, tuple(body.clone() for body in params.bodies))
    return params


class CpuNode:
    """A node: its parameters and its edges in both directions."""

    __slots__ = ("params", "deps", "dependents", "alloc", "attributes", "local_id", "kinds", "__weakref__")

    def __init__(self, params: Any, deps: Sequence[CpuNode], alloc: Any = None) -> None:
        self.params = params
        self.attributes = DEFAULT_ATTRIBUTES  # a kernel node's KernelAttributes
        self.deps: list[CpuNode] = list(deps)
        self.dependents: list[CpuNode] = []
        self.alloc = alloc  # the Allocation of an alloc or free node
        self.local_id = 0  # its id in its graph (given by the graph)
        # The kinds of its edges from ``deps`` that are not "full" (programmatic edges between kernels); the CPU
        # backend runs every edge as a full one, which is what such an edge allows at the latest.
        self.kinds: dict[CpuNode, str] = {}
        for dep in self.deps:
            dep.dependents.append(self)


class CpuUserObject:
    """A user object: ``destroy`` runs once its references are all released (by the thread releasing the last)."""

    __slots__ = ("_destroy", "_count", "_lock")

    def __init__(self, destroy: Any, count: int) -> None:
        self._destroy, self._count, self._lock = destroy, count, threading.Lock()

    def retain(self, count: int) -> None:
        with self._lock:
            self._count += count

    def release(self, count: int) -> None:
        with self._lock:
            self._count -= count
            last = self._count == 0
        if last:
            ident = threading.get_ident()
            marked = ident not in HOST_THREADS
            HOST_THREADS.add(ident)  # gpugraph calls are refused in it, as in the driver's thread on CUDA
            try:
                self._destroy()
            finally:
                if marked:
                    HOST_THREADS.discard(ident)


def _release_all(held: dict[CpuUserObject, int]) -> None:
    """(A graph's finalizer: its references to user objects go with it.)"""
    while held:
        obj, count = held.popitem()
        obj.release(count)


# Graph ids, as CUDA's: unique in the process (itertools.count's next is atomic in CPython).
_graph_ids = itertools.count(1)


class CpuGraph:
    """A graph: nodes in the order they were added, and the references it holds to user objects."""

    __slots__ = ("index", "id", "nodes", "clone_of", "user_objects", "_local_ids", "__weakref__")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = next(_graph_ids)
        self._local_ids = itertools.count()  # the ids of its nodes, never given twice
        self.nodes: list[CpuNode] = []
        self.clone_of: dict[CpuNode, CpuNode] = {}  # original node -> node of this clone
        self.user_objects: dict[CpuUserObject, int] | None = None  # (made, with a finalizer, on the first)

    def hold(self, obj: CpuUserObject, count: int) -> None:
        """Note ``count`` references to ``obj`` (retained already), released when the graph is collected."""
        held = self.user_objects
        if held is None:
            held = self.user_objects = {}
            weakref.finalize(self, _release_all, held).atexit = False
        held[obj] = held.get(obj, 0) + count

    def let_go(self, obj: CpuUserObject, count: int) -> None:
        """Release ``count`` of the graph's references to ``obj`` (the front end checked it holds them)."""
        held = self.user_objects or {}
        held[obj] -= count
        if not held[obj]:
            del held[obj]
        obj.release(count)

    def hold_those_of(self, other: CpuGraph) -> None:
        """Hold references of this graph's own to the user objects ``other`` holds (a copy of it)."""
        for obj, count in (other.user_objects or {}).items():
            obj.retain(count)
            self.hold(obj, count)

    def replace_references(self, other: CpuGraph) -> None:
        """Hold references to the user objects ``other`` holds instead of those held now (an update's)."""
        previous = dict(self.user_objects or {})
        self.hold_those_of(other)  # (first: an object both hold is never released to none meanwhile)
        for obj, count in previous.items():
            self.let_go(obj, count)

    def add(self, params: Any, deps: Sequence[CpuNode], alloc: Any = None) -> CpuNode:
        if isinstance(params, ConditionalParams):  # its bodies: new graphs of its own
            bodies = tuple(CpuGraph(self.index) for _ in params.bodies)
            params = ConditionalParams(params.type, params.condition, bodies)
        else:  # like CUDA, a child-graph node embeds a copy of the child graph taken now
            params = copied(params)
        node = CpuNode(params, deps, alloc)
        node.local_id = next(self._local_ids)
        self.nodes.append(node)
        return node

    def reusable_address(self, nbytes: int, deps: Sequence[CpuNode], index: int) -> int | None:
        """An address a new allocation node of device ``index``'s memory after ``deps`` may take, as CUDA gives
        it (or None): that of an allocation of this graph on that device whose range fits ``nbytes`` and whose
        every occupant is freed by a node the new one comes after. Concurrent allocations never share a range,
        nor do different graphs or devices."""
        freed, pending, seen = set(), list(deps), set()
        while pending:  # the frees ordered before the new node
            node = pending.pop()
            if node not in seen:
                seen.add(node)
                if isinstance(node.params, FreeParams):
                    freed.add(node.alloc)
                pending.extend(node.deps)
        if not freed:
            return None
        occupants: dict[int, list[Any]] = {}  # address -> the allocations of this graph made there, in order
        for node in self.nodes:
            if isinstance(node.params, AllocParams) and node.alloc.index == index:
                occupants.setdefault(node.alloc.ptr, []).append(node.alloc)
        for ptr, allocs in occupants.items():  # the first made there reserved the range
            if nbytes <= span(allocs[0].nbytes) and all(a in freed for a in allocs):
                return ptr
        return None

    def edges(self) -> list[tuple[CpuNode, CpuNode]]:
        return [(dep, node) for node in self.nodes for dep in node.deps]

    def clone(self) -> CpuGraph:
        copy = CpuGraph(self.index)
        mapping: dict[CpuNode, CpuNode] = {}
        for node in self.nodes:
            mapping[node] = CpuNode(copied(node.params), (), node.alloc)
            mapping[node].local_id = next(copy._local_ids)
            mapping[node].attributes = node.attributes
            copy.nodes.append(mapping[node])
        # Edges are wired after every node exists: add_dependency may point from a later node to an earlier one.
        for node in self.nodes:
            new = mapping[node]
            new.deps = [mapping[d] for d in node.deps]
            new.dependents = [mapping[d] for d in node.dependents]
            new.kinds = {mapping[d]: kind for d, kind in node.kinds.items()}
        copy.clone_of = mapping
        copy.hold_those_of(self)
        return copy


def update_refusal(originals: Sequence[CpuNode], nodes: Sequence[CpuNode],
                   node_priority: bool) -> tuple[str, CpuNode] | None:
    """What cuGraphExecUpdate would refuse when ``nodes`` take the parameters and attributes of ``originals``,
    paired in order (the front end has compared the topology, child graphs' included): (the rule, the node of
    ``nodes`` at fault), or None. A child graph at fault is named by its node, as the driver does.
    ``node_priority``: whether the executable graph was instantiated with use_node_priority (its kernel nodes'
    priorities cannot change then)."""
    paired: dict[CpuNode, CpuNode] | None = None  # (made only for a graph with kinded edges)
    for original, node in zip(originals, nodes):
        was, now = original.params, node.params
        if was.kind is not now.kind:
            return "node kind changed", node
        if original.kinds or node.kinds:
            paired = paired or dict(zip(originals, nodes))
            if {paired[d]: k for d, k in original.kinds.items()} != node.kinds:
                return "topology changed", node  # (an edge's kind: measured on the H200, the driver refuses it too)
        refusal = node_refusal(was, now)
        if refusal is not None:
            return refusal[0], node
        if now.kind is NodeKind.KERNEL:
            if attribute_refusal(original.attributes, node.attributes, node_priority) is not None:
                return "attributes changed", node  # (the driver's words; the front end explains which)
        elif now.kind is NodeKind.GRAPH:
            inside = update_refusal(was.graph.nodes, now.graph.nodes, node_priority)
            if inside is not None:
                return inside[0], node
        elif now.kind is NodeKind.CONDITIONAL:
            for was_body, body in zip(was.bodies, now.bodies):
                inside = update_refusal(was_body.nodes, body.nodes, node_priority)
                if inside is not None:
                    return inside[0], node
    return None
