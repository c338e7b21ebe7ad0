"""How deep child graphs nest, and the limit gpugraph sets (over a graph's reads: ``gpugraph._graph_reads``)."""

from __future__ import annotations

from typing import Any

from . import _graph_reads
from ._graph_reads import GraphFields
from ._nodes import NodeKind

MAX_NESTING = 64
"""The most levels of graphs one graph may hold: itself, its child graphs, theirs, and so on.

CUDA documents no limit on child-graph nesting. gpugraph refuses a child-graph node that would nest deeper
(``Graph.add_child``, and an executable graph launched into a capture, which embeds it as a child graph) on
every backend, so that the walks over the nesting (cloning, instantiating, updating; running, on the CPU
backend) stay far from Python's recursion limit."""


def nesting(graph: GraphFields[Any]) -> int:
    """How many levels of graphs ``graph`` holds (1 without child graphs), found without recursion."""
    deepest, pending = 1, [(graph, 1)]
    while pending:
        graph, level = pending.pop()
        deepest = max(deepest, level)
        topology = _graph_reads.topology(graph)
        for i, record in enumerate(topology.records):
            if record.kind is NodeKind.GRAPH:
                pending.append((_graph_reads.child(graph, topology.handles[i]), level + 1))
    return deepest


def nesting_refusal(graph: GraphFields[Any], child: GraphFields[Any]) -> str | None:
    """Why a child-graph node embedding a copy of ``child`` cannot be added to ``graph`` (None if it can):
    the nesting would pass ``MAX_NESTING`` levels."""
    level = _graph_reads.level(graph)
    levels = level + nesting(child)
    if levels <= MAX_NESTING:
        return None
    where = "a graph of its own" if level == 1 else f"a child graph at level {level}"
    return (f"the child graph would make graphs nest {levels} levels deep (this graph is {where}, the child "
            f"holds {levels - level}); gpugraph allows at most {MAX_NESTING} levels of child graphs")
