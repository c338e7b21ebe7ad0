"""Graphviz DOT export of a Graph."""

from __future__ import annotations

from typing import Any

from ._nodes import NodeKind


def _label(node: Any) -> str:
    p = node.params
    kind = node.kind
    if kind is NodeKind.KERNEL:
        return f"{getattr(p.kernel, 'name', p.kernel)}\\ngrid={p.grid} block={p.block}"
    if kind is NodeKind.MEMCPY:
        return f"memcpy {p.nbytes} B"
    if kind is NodeKind.MEMSET:
        return f"memset {p.count}x{p.element_size} B = {p.value!r}"
    if kind is NodeKind.HOST:
        return f"host {getattr(p.fn, '__qualname__', repr(p.fn))}"
    if kind is NodeKind.GRAPH:
        return f"child graph ({len(p.graph)} nodes)"
    if kind is NodeKind.MEM_ALLOC:
        return f"alloc {p.nbytes} B at {p.ptr:#x}"
    if kind is NodeKind.MEM_FREE:
        return f"free {p.ptr:#x}"
    return kind.value.replace("_", " ")


def to_dot(graph: Any) -> str:
    """Return ``graph`` as a DOT digraph, one box per node labelled with what it does."""
    nodes = graph.nodes
    lines = ["digraph gpugraph {", "  node [shape=box, fontname=monospace];"]
    for node in nodes:
        label = _label(node).replace('"', '\\"')
        lines.append(f'  n{node._number} [label="n{node._number}: {label}"];')
    for a, b in graph.edges:
        lines.append(f"  n{a._number} -> n{b._number};")
    lines.append("}")
    return "\n".join(lines) + "\n"
