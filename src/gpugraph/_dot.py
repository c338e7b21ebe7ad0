"""Graphviz DOT export of a Graph."""

from __future__ import annotations

from typing import Any

# The flags of the driver's own DOT dump (CUDA's cudaGraphDebugDotFlags and HIP's hipGraphDebugDotFlags, named
# without their prefix): what it adds to each node's description.
DOT_FLAGS = ("verbose", "runtime_types", "kernel_node_params", "memcpy_node_params", "memset_node_params",
             "host_node_params", "event_node_params", "ext_semas_signal_node_params", "ext_semas_wait_node_params",
             "kernel_node_attributes", "handles", "mem_alloc_node_params", "mem_free_node_params",
             "batch_mem_op_node_params", "extra_topo_info", "conditional_node_params")


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
