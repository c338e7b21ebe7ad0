"""What an executable CPU graph runs: its nodes in dependency order, cut into chains (runs of nodes each with one
predecessor whose only successor it is), and the plan a launch runs: each chain's steps, the compiled calls of its
nodes (``_executor`` compiles them; a chain runs as a plain loop, so a straight graph costs one Python call per
node).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ..._errors import GraphError
from ._graphs import CpuGraph, CpuNode

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


class Chain:
    """A run of nodes executed as a plain loop; its steps live in the plan (``Plan.steps[index]``)."""

    __slots__ = ("index", "preds", "successors")

    def __init__(self, index: int) -> None:
        self.index = index
        self.preds: set[Chain] = set()
        self.successors: list[Chain] = []


class Plan:
    """What a launch runs: the chains, the steps of each, and the event-record and event-wait nodes.

    A published plan is never changed while a launch may hold it: a change publishes a new plan (or new
    steps) with one assignment, so each launch runs the whole old or the whole new graph. Record and wait
    nodes read their completion from a one-item slot that each run fills from its launch; the instances
    of one executable graph never overlap, so one slot per node suffices.
    """

    __slots__ = ("chains", "steps", "roots", "where", "records", "waits", "resets", "conditions")

    def __init__(self, chains: list[Chain], steps: list[list[Step]], where: dict[CpuNode, tuple[int, int]],
                 records: list[tuple[Any, list]], waits: list[tuple[Any, list]], conditions: list[Any]) -> None:
        self.chains = chains
        self.steps = steps
        self.roots = [c for c in chains if not c.preds]
        self.where = where  # node -> its chain's index and step position
        self.records = records  # (event, slot): every event-record node's, child graphs' included
        self.waits = waits  # (event, slot): every event-wait node's
        self.resets = [c for c in conditions if c.reset]  # the CpuConditions that each launch resets
        # What the header's cudaGraphSetConditional may set in a run of this plan: (handle, value's address) of
        # every condition its conditional nodes read, in bodies too.
        self.conditions = np.array([n for c in conditions for n in (c.handle, c.cell.ctypes.data)], np.uint64)

    def with_steps(self, steps: list[list[Step]]) -> Plan:
        plan = Plan.__new__(Plan)
        plan.chains, plan.steps, plan.roots, plan.where = self.chains, steps, self.roots, self.where
        plan.records, plan.waits, plan.resets, plan.conditions = self.records, self.waits, self.resets, self.conditions
        return plan
