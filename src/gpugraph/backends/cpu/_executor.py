"""Instantiated CPU graphs: nodes compiled once into calls, run in dependency order, with independent
branches on a thread pool.

At instantiate the DAG is cut into chains (runs of nodes each with one predecessor whose only successor
it is); a chain runs as a plain loop, so a straight graph costs one Python call per node, and only
chains that become ready together are handed to the pool.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Executor
from typing import Any, Callable

from ..._errors import GraphError
from .._graph_memory import GraphMemoryRules
from ..._kernel import LaunchConfig
from ..._nodes import (AllocParams, ChildGraphParams, EmptyParams, EventRecordParams, EventWaitParams,
                       FreeParams, HostParams, KernelParams, MemcpyParams, MemsetParams)
from ._graphs import CpuGraph, CpuNode
from ._ops import (map_allocation, run_kernel, run_memcpy, run_memset, static_arg, static_operand,
                   unmap_allocation)

Step = tuple[Callable[..., Any], tuple]


def topological_order(graph: CpuGraph) -> list[CpuNode]:
    """Nodes in dependency order, ties kept in insertion order."""
    pending = {node: len(node.deps) for node in graph.nodes}
    ready = deque(node for node in graph.nodes if not node.deps)
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for dependent in node.dependents:
            pending[dependent] -= 1
            if pending[dependent] == 0:
                ready.append(dependent)
    if len(order) != len(graph.nodes):
        raise GraphError("instantiate: the graph has a dependency cycle")
    return order


class _Chain:
    __slots__ = ("steps", "preds", "successors", "index")

    def __init__(self, index: int) -> None:
        self.index = index
        self.steps: list[Step] = []
        self.preds: set[_Chain] = set()
        self.successors: list[_Chain] = []


class CpuExec:
    """An executable graph of the CPU backend."""

    def __init__(self, graph: CpuGraph, auto_free_on_launch: bool, pool: Callable[[], Executor]) -> None:
        self._pool = pool
        self.template = graph.clone()  # as instantiated: what a launch into a capture embeds
        self.event_records: list[tuple[Any, deque]] = []  # (event, records of launches not yet run)
        self.last_done: threading.Event | None = None  # set when the latest launch has run
        self.auto_free_on_launch = auto_free_on_launch
        order = topological_order(graph)
        self.memory = GraphMemoryRules.of([n.alloc for n in order if isinstance(n.params, AllocParams)],
                                       [n.alloc for n in order if isinstance(n.params, FreeParams)],
                                       auto_free_on_launch)
        self.chains: list[_Chain] = []
        chain_of: dict[CpuNode, _Chain] = {}
        for node in order:
            deps = node.deps
            if len(deps) == 1 and len(deps[0].dependents) == 1:
                chain = chain_of[deps[0]]
            else:
                chain = _Chain(len(self.chains))
                chain.preds = {chain_of[d] for d in deps}
                self.chains.append(chain)
            chain_of[node] = chain
            step = self._compile(node)
            if step is not None:
                chain.steps.append(step)
        for chain in self.chains:
            for pred in chain.preds:
                pred.successors.append(chain)
        self.roots = [c for c in self.chains if not c.preds]
        self.serial_steps = self.chains[0].steps if len(self.chains) == 1 else None

    def _compile(self, node: CpuNode) -> Step | None:
        """The call a node makes, with every view that can be made now made now."""
        p = node.params
        if isinstance(p, KernelParams):
            return run_kernel, (p.kernel, LaunchConfig(p.grid, p.block, p.shared_mem),
                                tuple(static_arg(a) for a in p.args))
        if isinstance(p, MemcpyParams):
            return run_memcpy, (static_operand(p.dst, p.nbytes), static_operand(p.src, p.nbytes), p.nbytes)
        if isinstance(p, MemsetParams):
            return run_memset, (static_operand(p.dst, p.count * p.element_size), p.pattern,
                                p.element_size, p.count)
        if isinstance(p, HostParams):
            return p.fn, p.args
        if isinstance(p, ChildGraphParams):
            child = CpuExec(p.graph, False, self._pool)
            self.event_records.extend(child.event_records)  # recorded at each launch of this graph
            return child.run, ()
        if isinstance(p, EventRecordParams):
            pending: deque = deque()
            self.event_records.append((p.event._handle, pending))
            return _fire_next, (pending,)
        if isinstance(p, EventWaitParams):
            return p.event._handle.wait_latest, ()
        if isinstance(p, AllocParams):
            return map_allocation, (node.alloc,)
        if isinstance(p, FreeParams):
            return unmap_allocation, (node.alloc,)
        assert isinstance(p, EmptyParams), p  # internal invariant: every params kind is handled above
        return None

    def record_events(self) -> None:
        """At launch: record every event of an event-record node (fired when the node runs)."""
        for event, pending in self.event_records:
            event.record_at_launch(pending)

    def run_then_set(self, done: threading.Event) -> None:
        """Run the graph (one launch), then set ``done`` whatever happened."""
        try:
            self.run()
        finally:
            done.set()

    def run(self) -> None:
        """Run every node once, in dependency order; raise the first error after all have run."""
        steps = self.serial_steps
        if steps is None:
            _ParallelRun(self).drive()
            return
        error = None
        for fn, args in steps:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the graph completes
                error = error or exc
        if error is not None:
            raise error


def _fire_next(pending: deque) -> None:
    pending.popleft().fire()


class _ParallelRun:
    """One run of a graph with several chains: the calling thread runs chains, pool threads help."""

    def __init__(self, exe: CpuExec) -> None:
        self.pool = exe._pool()
        self.pending = [len(c.preds) for c in exe.chains]
        self.ready = deque(exe.roots)
        self.left = len(exe.chains)
        self.cond = threading.Condition()
        self.error: BaseException | None = None

    def drive(self) -> None:
        self._call_helpers(len(self.ready) - 1)
        while True:
            with self.cond:
                while not self.ready and self.left:
                    self.cond.wait()
                if not self.left:
                    break
                chain = self.ready.popleft()
            self._run_chain(chain)
        if self.error is not None:
            raise self.error

    def _help(self) -> None:
        while True:
            with self.cond:
                if not self.ready:
                    return
                chain = self.ready.popleft()
            self._run_chain(chain)

    def _call_helpers(self, count: int) -> None:
        for _ in range(count):
            self.pool.submit(self._help)

    def _run_chain(self, chain: _Chain) -> None:
        for fn, args in chain.steps:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised by drive()
                self.error = self.error or exc
        with self.cond:
            self.left -= 1
            for successor in chain.successors:
                self.pending[successor.index] -= 1
                if self.pending[successor.index] == 0:
                    self.ready.append(successor)
            extra = len(self.ready) - 1
            self.cond.notify_all()
        if extra > 0:
            self._call_helpers(extra)
