"""Graphviz DOT export of a Graph, and its SVG drawing through Graphviz (the optional ``graphviz`` package and the
``dot`` program it runs)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

# The flags of the driver's own DOT dump (CUDA's cudaGraphDebugDotFlags and HIP's hipGraphDebugDotFlags, named
# without their prefix): what it adds to each node's description.
DOT_FLAGS = ("verbose", "runtime_types", "kernel_node_params", "memcpy_node_params", "memset_node_params",
             "host_node_params", "event_node_params", "ext_semas_signal_node_params", "ext_semas_wait_node_params",
             "kernel_node_attributes", "handles", "mem_alloc_node_params", "mem_free_node_params",
             "batch_mem_op_node_params", "extra_topo_info", "conditional_node_params")

# Each node kind's (NodeKind's value's) shape and fill, so that kinds tell apart at a glance.
KIND_STYLES = {
    "kernel": ("box", "#cfe2ff"),
    "memcpy": ("parallelogram", "#d1e7dd"),
    "memset": ("parallelogram", "#e2f0d9"),
    "host": ("hexagon", "#fff3cd"),
    "graph": ("box3d", "#e9ecef"),
    "empty": ("ellipse", "#ffffff"),
    "event_record": ("cds", "#f8d7da"),
    "event_wait": ("cds", "#f1c0c5"),
    "mem_alloc": ("house", "#e0cffc"),
    "mem_free": ("invhouse", "#e0cffc"),
    "conditional": ("diamond", "#ffe5d0"),
    "semaphore_signal": ("octagon", "#d2f4ea"),
    "semaphore_wait": ("octagon", "#b8e8d8"),
    "mem_ops": ("note", "#fde2e4"),
}
# The attributes of an edge of each dependency kind (DEPENDENCY_KINDS); a full edge is drawn plain.
EDGE_STYLES = {
    "full": "",
    "programmatic": ' [style=dashed, color="#1f5fbf", label="programmatic"]',
    "launch_order": ' [style=dotted, color="#1f5fbf", label="launch_order"]',
}
HAZARD_COLOUR = "red"

INSTALL = ('draws with Graphviz: install its Python package with pip install graphviz (or, in a checkout, '
           'pip install ".[svg]"), and its dot program with the system package graphviz (apt install graphviz, '
           'dnf install graphviz, brew install graphviz, or from graphviz.org)')


class _Node(Protocol):
    """What the drawing reads of a node (a gpugraph Node; by these protocols this module stays below the graph's)."""

    _number: int

    @property
    def kind(self) -> Any: ...

    @property
    def params(self) -> Any: ...

    @property
    def bodies(self) -> Sequence[_Graph]: ...

    @property
    def graph(self) -> Any: ...


class _Graph(Protocol):
    """What the drawing reads of a graph (a Graph, or the graph of a child-graph node or a body)."""

    @property
    def nodes(self) -> Sequence[_Node]: ...

    @property
    def edges(self) -> Sequence[tuple[_Node, _Node]]: ...


class _Hazard(Protocol):
    """What the drawing reads of a Hazard."""

    @property
    def kind(self) -> str: ...

    @property
    def nodes(self) -> tuple[Any, Any]: ...


def to_dot(graph: _Graph, hazards: Iterable[_Hazard] = ()) -> str:
    """Return ``graph`` as a DOT digraph: one node per graph node, labelled with what it does, shaped and filled by its
    kind; each child graph and conditional body a cluster holding its nodes; edges other than full ones styled by
    their kind; and the two nodes of each of ``hazards`` (``Hazard``s of the graph) outlined in red, joined by a red
    dashed edge labelled with the hazard's kind."""
    hazards = tuple(hazards)
    marked = {id(node) for hazard in hazards for node in hazard.nodes}
    lines = ["digraph gpugraph {", "  node [shape=box, fontname=monospace, style=filled];"]
    names: dict[int, str] = {}
    _graph_lines(graph, "n", "  ", lines, names, marked)
    for hazard in hazards:
        a, b = (names.get(id(node)) for node in hazard.nodes)
        if a is None or b is None:
            raise ValueError(f"hazards: {hazard.nodes[0 if a is None else 1]!r} of the hazard {hazard.kind} "
                             f"{hazard.nodes} is not a node of {graph!r} (nor of its child graphs or conditional "
                             f"bodies); pass the hazards this graph's hazards() gives")
        lines.append(f'  {a} -> {b} [color={HAZARD_COLOUR}, fontcolor={HAZARD_COLOUR}, style=dashed, '
                     f'constraint=false, label="{hazard.kind}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _graph_lines(graph: _Graph, prefix: str, indent: str, lines: list[str], names: dict[int, str],
                 marked: set[int]) -> None:
    """Append the lines of ``graph``'s nodes (named ``prefix`` and their number) and edges, and those of the child
    graphs and bodies they embed, as clusters."""
    for node in graph.nodes:
        name = names[id(node)] = f"{prefix}{node._number}"
        label = node.params.label().replace('"', '\\"')
        kind = node.kind.value
        shape, fill = KIND_STYLES[kind]
        mark = f", color={HAZARD_COLOUR}, penwidth=3" if id(node) in marked else ""
        line = f'{name} [label="{name}: {label}", shape={shape}, fillcolor="{fill}"{mark}];'
        if kind == "graph":
            inner = [("", f"{name}_", node.params.graph)]
        elif kind == "conditional":
            inner = [(f"body {i}", f"{name}_b{i}_", body) for i, body in enumerate(node.bodies)]
        else:
            lines.append(indent + line)
            continue
        # The embedding node and what it embeds share a cluster: the edges to and from the node reach the cluster.
        lines += [f"{indent}subgraph cluster_{name} {{", f'{indent}  label="{name}: {label}"; style=rounded;',
                  f"{indent}  {line}"]
        for title, inner_prefix, inner_graph in inner:
            if title:
                lines += [f"{indent}  subgraph cluster_{inner_prefix[:-1]} {{",
                          f'{indent}    label="{title}"; style=dashed;']
                _graph_lines(inner_graph, inner_prefix, indent + "    ", lines, names, marked)
                lines.append(f"{indent}  }}")
            else:
                _graph_lines(inner_graph, inner_prefix, indent + "  ", lines, names, marked)
        lines.append(f"{indent}}}")
    for a, b in graph.edges:
        # (Only an edge between two kernel nodes may be of a kind other than full: the others need no driver call.)
        kernels = a.kind.value == b.kind.value == "kernel"
        lines.append(f"{indent}{names[id(a)]} -> {names[id(b)]}"
                     f"{EDGE_STYLES[a.graph.dependency_kind(a, b) if kernels else 'full']};")


def to_svg(graph: _Graph, path: str | os.PathLike[str] | None, hazards: Iterable[_Hazard]) -> str:
    """``graph``'s drawing (``to_dot``, ``hazards`` marked) laid out by Graphviz's ``dot`` as an SVG document, also
    written to the file ``path`` where given."""
    svg = render_svg(to_dot(graph, hazards))
    if path is not None:
        with open(os.fspath(path), "w", encoding="utf-8") as file:
            file.write(svg)
    return svg


def render_svg(dot: str) -> str:
    """The SVG document Graphviz's ``dot`` lays ``dot`` (DOT text) out as."""
    try:
        import graphviz  # type: ignore[import-untyped,import-not-found,unused-ignore]  # (no annotations)
    except ImportError as error:
        raise ImportError(f"to_svg: the graphviz Python package is not installed; to_svg {INSTALL}") from error
    try:
        svg: str = graphviz.Source(dot, engine="dot").pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as error:
        raise RuntimeError(f"to_svg: Graphviz's dot program is not on PATH (the graphviz Python package runs "
                           f"it); to_svg {INSTALL}") from error
    return svg
