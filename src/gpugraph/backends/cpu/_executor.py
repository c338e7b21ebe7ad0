"""Instantiated CPU graphs: nodes compiled once into calls, run in dependency order, with independent
branches on a thread pool.

At instantiate the DAG is cut into chains (runs of nodes each with one predecessor whose only successor
it is); a chain runs as a plain loop, so a straight graph costs one Python call per node, and only
chains that become ready together are handed to the pool.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from ..._errors import GraphError
from ..._kernel import LaunchConfig
from ..._nodes import (
    AllocParams,
    ChildGraphParams,
    EmptyParams,
    EventRecordParams,
    EventWaitParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
)
from ..._params import resolve
from .._graph_memory import GraphMemoryRules
from ._graphs import CpuGraph, CpuNode
from ._ops import map_allocation, run_kernel, run_memcpy, run_memset, static_arg, static_operand, unmap_allocation

Step = tuple[Callable[..., Any], tuple]
_Launch = tuple  # (chains, the steps of each chain, root chains) of one launch


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
    """An executable graph of the CPU backend.

    It runs a private copy of the graph it was instantiated from (``template``), so later changes to
    that graph do not reach it; setters and updates change the copy and re-plan. Each launch runs the
    steps as they were when it was launched, as CUDA applies changes only to later launches.
    """

    def __init__(self, graph: CpuGraph, auto_free_on_launch: bool, pool: Callable[[], Executor]) -> None:
        self._pool = pool
        self.auto_free_on_launch = auto_free_on_launch
        self.template = graph.clone()  # what it runs, and what a launch into a capture embeds
        self.disabled: set[CpuNode] = set()
        self.last_done: threading.Event | None = None  # set when the latest launch has run
        self._plan()

    def _plan(self) -> None:
        """Cut the graph into chains and compile every node's call."""
        order = topological_order(self.template)
        self.memory = GraphMemoryRules.of([n.alloc for n in order if isinstance(n.params, AllocParams)],
                                          [n.alloc for n in order if isinstance(n.params, FreeParams)],
                                          self.auto_free_on_launch)
        self.event_records: list[tuple[Any, deque]] = []  # (event, records of launches not yet run)
        self.chains: list[_Chain] = []
        self.where: dict[CpuNode, tuple[_Chain, int]] = {}  # node -> its chain and step position
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
            step = _NOOP if node in self.disabled else self._compile(node)
            if step is not None:
                self.where[node] = (chain, len(chain.steps))
                chain.steps.append(step)
        for chain in self.chains:
            for pred in chain.preds:
                pred.successors.append(chain)
        self.roots = [c for c in self.chains if not c.preds]

    def _compile(self, node: CpuNode) -> Step | None:
        """The call a node makes, with every view that can be made now made now."""
        p = node.params
        if isinstance(p, KernelParams):
            args = p.kernel.typed_args(tuple(resolve(a) for a in p.args))
            return run_kernel, (p.kernel, LaunchConfig(p.grid, p.block, p.shared_mem),
                                tuple(static_arg(a) for a in args))
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
        if not isinstance(p, EmptyParams):
            raise TypeError(f"cpu: no step for parameters of type {type(p).__name__}")
        return None

    # Changes

    def _replace_step(self, node: CpuNode) -> None:
        """Give one node a new call; the chain's list is replaced, not changed, so launches already made
        keep running the steps they were launched with."""
        chain, position = self.where[node]
        steps = list(chain.steps)
        # Not None: only nodes with a step are in ``where`` (_compile returns None for empty nodes alone).
        steps[position] = _NOOP if node in self.disabled else self._compile(node)  # type: ignore[assignment]
        chain.steps = steps

    def set_node(self, original: CpuNode, params: Any) -> None:
        node = self.template.clone_of[original]
        if isinstance(params, ChildGraphParams):
            params = ChildGraphParams(params.graph.clone())
        node.params = params
        if isinstance(params, (KernelParams, MemcpyParams, MemsetParams, HostParams)):
            self._replace_step(node)
        else:  # child graphs and events take part in planning (event records): plan again
            self._plan()

    def set_enabled(self, original: CpuNode, enabled: bool) -> None:
        node = self.template.clone_of[original]
        (self.disabled.discard if enabled else self.disabled.add)(node)
        self._replace_step(node)

    def update(self, graph: CpuGraph, originals: list[CpuNode]) -> None:
        """Take the parameters of ``graph``, whose nodes pair with ``originals`` in creation order."""
        for original, new in zip(originals, graph.nodes):
            params = new.params
            if isinstance(params, ChildGraphParams):
                params = ChildGraphParams(params.graph.clone())
            self.template.clone_of[original].params = params
        self._plan()

    # Running

    def record_events(self) -> None:
        """At launch: record every event of an event-record node (fired when the node runs)."""
        for event, pending in self.event_records:
            event.record_at_launch(pending)

    def snapshot(self) -> _Launch:
        """The chains and their steps as they are now: what a launch made now will run."""
        return self.chains, [chain.steps for chain in self.chains], self.roots

    def run_then_set(self, done: threading.Event, launch: _Launch) -> None:
        """Run one launch, then set ``done`` whatever happened."""
        try:
            self.run(launch)
        finally:
            done.set()

    def run(self, launch: _Launch | None = None) -> None:
        """Run every node once, in dependency order; raise the first error after all have run."""
        chains, steps, roots = self.snapshot() if launch is None else launch
        if len(steps) != 1:
            _ParallelRun(self._pool(), chains, steps, roots).drive()
            return
        error = None
        for fn, args in steps[0]:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, after the graph completes
                error = error or exc
        if error is not None:
            raise error


def _fire_next(pending: deque) -> None:
    pending.popleft().fire()


def _nothing() -> None:
    """A disabled node's step."""


_NOOP: Step = (_nothing, ())


class _ParallelRun:
    """One run of a graph with several chains: the calling thread runs chains, pool threads help."""

    def __init__(self, pool: Executor, chains: list[_Chain], steps: list[list[Step]], roots: list[_Chain]) -> None:
        self.steps = steps
        self.pool = pool
        self.pending = [len(c.preds) for c in chains]
        self.ready = deque(roots)
        self.left = len(chains)
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
        for fn, args in self.steps[chain.index]:
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
