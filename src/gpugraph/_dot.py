"""Graphviz DOT export of a Graph."""

from __future__ import annotations

from typing import Any


def to_dot(graph: Any) -> str:
    """Return ``graph`` as a DOT digraph, one box per node labelled with what it does."""
    nodes = graph.nodes
    lines = ["digraph gpugraph {", "  node [shape=box, fontname=monospace];"]
    for node in nodes:
        label = node.params.label().replace('"', '\\"')
        lines.append(f'  n{node._number} [label="n{node._number}: {label}"];')
    for a, b in graph.edges:
        lines.append(f"  n{a._number} -> n{b._number};")
    lines.append("}")
    return "\n".join(lines) + "\n"
