"""What executable graphs, instantiate and update read of a Graph (``gpugraph._exec``, ``_exec_state``,
``_instantiate``, ``_update``), and a graph's edits of another graph (``_graph_edit``): its backend handle, its
Topology, the Node of a backend handle, the graphs a node embeds, its shape and version, whether it is a body,
whether a node is still in it, and the kinds it holds. Also what a capture (``gpugraph._capture``) reads and tells
of the graph it records into: its lock, the nodes it starts after, and when recording begins and ends.
"""

# A Graph's state is private to its users; these readers are gpugraph's own: the one place where executable graphs,
# instantiate, update and captures read it, and where a graph reads another graph's.

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

from ._nodes import NodeKind
from ._topology import Topology
from .backends._protocol import Backend

N = TypeVar("N")  # the graph's Node (gpugraph._graph_node.Node)


class GraphFields(Protocol[N]):
    """What these readers use of a Graph (``gpugraph._graph_state.GraphState``'s fields and methods), named here so
    that this module, below the graph's modules, imports none of them (nor ``Node``, which names ``Graph``)."""

    _topology: Topology
    _handle: Any
    _backend: Backend
    device: Any  # (its Device, which sits above the graph's modules)

    @property
    def _version(self) -> int: ...

    @property
    def _lock(self) -> AbstractContextManager[Any]: ...

    @property
    def _bodies(self) -> Mapping[Any, tuple[GraphFields[N], ...]]: ...

    def _current(self) -> Topology: ...

    def _node(self, handle: object) -> N: ...

    def _position(self, handle: object) -> int: ...

    def _child(self, handle: object) -> GraphFields[N]: ...

    def _body_graphs(self, node: N) -> tuple[GraphFields[N], ...]: ...

    def _in_body(self) -> bool: ...

    def _level(self) -> int: ...

    def _following_top(self) -> tuple[GraphFields[N], list[Any]]: ...

    def _has_node(self, node: object) -> bool: ...

    def _holds_other_than(self, kinds: frozenset) -> NodeKind | None: ...

    def _deps(self, after: object, what: str) -> list[N]: ...

    def _locate(self, nodes: list[N], what: str) -> list[int]: ...

    def _changing(self) -> None: ...

    def _tell_owners(self) -> None: ...

    def _begin_recording(self) -> None: ...

    def _end_recording(self) -> None: ...

    def _refresh(self) -> None: ...

    def _take(self) -> None: ...


def version(graph: GraphFields[N]) -> int:
    """How many changes the graph has had (a change of a graph embedded in it counts as one of it too): an
    executable graph compares it with the count it was made, or last updated, at."""
    return graph._version


def handle(graph: GraphFields[N]) -> Any:
    """The backend graph under ``graph``: what the backend's calls name it by (a child-graph node embeds a copy)."""
    return graph._handle


def topology(graph: GraphFields[N]) -> Topology:
    """The graph's Topology as it is now: gpugraph's one record of its nodes (backend handles, parameter records and
    numbers in creation order, edges), read again first while a capture records into the graph. It is the
    graph's own record, not a copy: read it, never change it."""
    return graph._current()


def node_of(graph: GraphFields[N], handle: object) -> N:
    """The Node of the backend node ``handle`` of ``graph`` (one of ``topology(graph).handles``): one object per
    node."""
    return graph._node(handle)


def embedded_graphs(graph: GraphFields[N], handle: object) -> tuple[GraphFields[N], ...]:
    """The Graphs that the node ``handle`` of ``graph`` embeds: a child-graph node's graph (``node.params.graph``),
    a conditional node's bodies (``node.bodies``, made when first asked for); none for a node of another kind."""
    i = graph._position(handle)  # (which reads the graph again only if it does not know the node)
    kind = graph._topology.records[i].kind
    if kind is NodeKind.GRAPH:
        return (graph._child(handle),)
    if kind is NodeKind.CONDITIONAL:
        return graph._body_graphs(graph._node(handle))
    return ()


def shape(graph: GraphFields[N], like: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """The graph's topology with nodes named by creation order: each node's dependencies as sorted positions
    (kept by its Topology until it changes), with its child graphs' and its conditional nodes' bodies' shapes in
    node order. Two graphs pair node for node in creation order, child graphs and bodies included, exactly when
    their shapes are equal (as ``GraphExec.update`` pairs them); it is cheaper than comparing the nodes'
    parameters. ``like``: a shape the caller compares with: returned itself when the graph's equals it
    (``Topology.has_shape``, which may not need to read the graph's edges)."""
    current = graph._current()
    if like is not None and not like[1] and not like[2] and not current.nested() and not graph._bodies \
            and current.has_shape(like[0]):
        return like
    handles = current.handles
    bodies = [bodies for _, bodies in sorted((current.position[h], b) for h, b in graph._bodies.items())]
    return (current.shape(), tuple(shape(graph._child(handles[i])) for i in current.nested()),
            tuple(tuple(shape(body) for body in group) for group in bodies))


def in_body(graph: GraphFields[N]) -> bool:
    """Whether the graph is a body of a conditional node (it belongs to that node: ``Node.bodies``)."""
    return graph._in_body()


def has_node(graph: GraphFields[N], node: object) -> bool:
    """Whether ``node`` is a Node of ``graph`` that is still in it (``remove_node`` takes one out)."""
    return graph._has_node(node)


def holds_other_than(graph: GraphFields[N], kinds: frozenset) -> NodeKind | None:
    """The kind of a node of the graph, or of its child graphs, that is not among ``kinds``, or None."""
    return graph._holds_other_than(kinds)


# What a capture reads and tells of the graph it records into, or makes (gpugraph._capture).


def lock(graph: GraphFields[N]) -> AbstractContextManager[Any]:
    """The graph's lock: its changes on other threads come wholly before or after what is done holding it."""
    return graph._lock


def nodes_of(graph: GraphFields[N], after: object, what: str) -> list[N]:
    """The Nodes ``after`` names (a Node or an iterable of them) for the call ``what``, checked to be Nodes of
    ``graph``, each named once."""
    return graph._deps(after, what)


def locate(graph: GraphFields[N], nodes: list[N], what: str) -> None:
    """Check that each of ``nodes`` (Nodes of ``graph``) is still in it, for the call ``what``."""
    graph._locate(nodes, what)


def before_capture(graph: GraphFields[N], after: list[N]) -> set[Any]:
    """A capture into ``graph`` after the nodes ``after`` is about to begin: check they are still in it (first: a
    refused dependency is no change), let executable graphs made from it read it before the capture adds to it,
    and return the backend handles of its nodes now (a discarded capture removes the others)."""
    with graph._lock:
        graph._locate(after, "capture")
        graph._changing()
        graph._tell_owners()  # (a child graph's capture changes what the graphs embedding it run)
        return set(graph._current().handles)


def begin_recording(graph: GraphFields[N]) -> None:
    """A capture records into the backend graph from now on: every query of ``graph`` reads it again."""
    graph._begin_recording()


def end_recording(graph: GraphFields[N]) -> None:
    """The capture recording into ``graph`` has ended (``refresh`` reads it whole once more)."""
    graph._end_recording()


def refresh(graph: GraphFields[N]) -> None:
    """Read the backend graph again after a capture that recorded into it ended, or was discarded."""
    graph._refresh()


def take(graph: GraphFields[N]) -> None:
    """``graph`` destroys its backend graph when collected (a capture hands the graph it made over at its end)."""
    graph._take()
