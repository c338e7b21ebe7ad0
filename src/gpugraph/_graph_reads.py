"""What executable graphs, instantiate and update read of a Graph (``gpugraph._exec``, ``_exec_state``,
``_instantiate``, ``_update``), a graph's edits of another graph (``_graph_edit``, ``_graph_build``), its Nodes
(``_graph_node``) and the nesting limit (``_nesting``): its backend and backend handle, its Topology, the Node, the
position and the record of a backend handle, the graphs a node embeds, its shape, version and level, whether it is a
body, whether a node is still in it, and the kinds it holds. Also what an executable graph tells the graph it runs
(that it follows it, or no longer counts as its live one; a launch into a capture embedding it) and asks of it (whether
its conditions drive another); what a capture (``gpugraph._capture``) reads and tells of the graph it records into:
its lock, the nodes it starts after, and when recording begins and ends; and the rules a kernel node's arguments and
a body's nodes meet there, which streams and captures apply to their captured work as the graph applies them.
"""

# A Graph's state is private to its users; these readers are gpugraph's own: the one place where executable graphs,
# instantiate, update, captures, streams and Nodes read it, and where a graph reads another graph's.

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

    def _following_top(self) -> tuple[object, list[Any]]: ...

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

    def _locked(self) -> AbstractContextManager[Any]: ...

    def _condition_values(self, args: tuple, api: str, kernel: object) -> tuple: ...

    def _refuse_in_body(self, what: str, kind: str) -> None: ...

    def _followed_by(self, exe: object, updated: bool) -> None: ...

    def _let_go(self, exe: object) -> None: ...

    def _drives_another(self, exe: object) -> bool: ...

    def _note_embedded(self, handle: object, source: Any) -> None: ...


def version(graph: GraphFields[N]) -> int:
    """How many changes the graph has had (a change of a graph embedded in it counts as one of it too): an
    executable graph compares it with the count it was made, or last updated, at."""
    return graph._version


def handle(graph: GraphFields[N]) -> Any:
    """The backend graph under ``graph``: what the backend's calls name it by (a child-graph node embeds a copy)."""
    return graph._handle


def backend(graph: GraphFields[N]) -> Backend:
    """The backend of ``graph`` (its device's)."""
    return graph._backend


def topology(graph: GraphFields[N]) -> Topology:
    """The graph's Topology as it is now: gpugraph's one record of its nodes (backend handles, parameter records and
    numbers in creation order, edges), read again first while a capture records into the graph. It is the
    graph's own record, not a copy: read it, never change it."""
    return graph._current()


def node_of(graph: GraphFields[N], handle: object) -> N:
    """The Node of the backend node ``handle`` of ``graph`` (one of ``topology(graph).handles``): one object per
    node."""
    return graph._node(handle)


def position(graph: GraphFields[N], handle: object) -> int:
    """The creation-order position of the node ``handle`` in ``graph``'s Topology (read again only if it does not know
    the node); GraphError if the graph no longer has it."""
    return graph._position(handle)


def record(graph: GraphFields[N], handle: object) -> Any:
    """The parameter record of the node ``handle`` of ``graph`` (``KernelParams``, ...); GraphError if the graph no
    longer has it."""
    i = graph._position(handle)  # (first: it may read the graph again, replacing its Topology)
    return graph._topology.records[i]


def child(graph: GraphFields[N], handle: object) -> GraphFields[N]:
    """The Graph over what the child-graph node ``handle`` of ``graph`` embeds (one at a time: the one in use)."""
    return graph._child(handle)


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


def level(graph: GraphFields[N]) -> int:
    """1 for a graph of its own; one more than its owner's for the graph embedded in a child-graph node."""
    return graph._level()


def in_body(graph: GraphFields[N]) -> bool:
    """Whether the graph is a body of a conditional node (it belongs to that node: ``Node.bodies``)."""
    return graph._in_body()


def has_node(graph: GraphFields[N], node: object) -> bool:
    """Whether ``node`` is a Node of ``graph`` that is still in it (``remove_node`` takes one out)."""
    return graph._has_node(node)


def holds_other_than(graph: GraphFields[N], kinds: frozenset) -> NodeKind | None:
    """The kind of a node of the graph, or of its child graphs, that is not among ``kinds``, or None."""
    return graph._holds_other_than(kinds)


def following_top(graph: GraphFields[N]) -> tuple[object, list[Any]]:
    """The graph embedding ``graph`` at the top (``graph`` itself, if none embeds it), and the executable graphs made
    from it or updated with it: those whose layout may hold ``graph``'s nodes."""
    return graph._following_top()


# What an executable graph tells and asks the graph it runs (gpugraph._exec_state, _exec): each changes whom the
# graph tells of its changes, or the graph itself.


def followed_by(graph: GraphFields[N], exe: object, updated: bool) -> None:
    """The executable graph ``exe`` was made from ``graph``, or ``updated`` with it: the graph tells it of its
    changes from now on."""
    graph._followed_by(exe, updated)


def let_go(graph: GraphFields[N], exe: object) -> None:
    """The executable graph ``exe`` was closed: it no longer counts as ``graph``'s one live executable graph."""
    graph._let_go(exe)


def drives_another(graph: GraphFields[N], exe: object) -> bool:
    """Whether ``graph``'s conditions drive an executable graph other than ``exe`` (CUDA lets one executable graph of a
    graph with conditional nodes live at a time)."""
    return graph._drives_another(exe)


def note_embedded(graph: GraphFields[N], handle: object, source: GraphFields[N]) -> None:
    """A launch into a capture recording into ``graph`` embedded a copy of ``source`` as its child-graph node
    ``handle``: ``graph`` notes it, described from ``source``."""
    graph._note_embedded(handle, source)


# The rules of the nodes a graph holds, which work captured into it meets too (gpugraph._stream, _capture, _records).


def condition_values(graph: GraphFields[N], args: tuple, api: str, kernel: object) -> tuple:
    """A kernel node's ``args`` with each Condition among them (checked: ``graph``'s, or one of a graph it is a body of)
    replaced by the value its kernel is passed; ``args`` when none is (``api(kernel)``: the call, for errors)."""
    return graph._condition_values(args, api, kernel)


def refuse_in_body(graph: GraphFields[N], what: str, kind: str) -> None:
    """Refuse the call ``what``, which would add a node of ``kind`` to ``graph``, where ``graph`` is a conditional
    node's body (which cannot hold such nodes)."""
    graph._refuse_in_body(what, kind)


# What a capture reads and tells of the graph it records into, or makes (gpugraph._capture).


def lock(graph: GraphFields[N]) -> AbstractContextManager[Any]:
    """The graph's lock: its changes on other threads come wholly before or after what is done holding it."""
    return graph._lock


def locked(graph: GraphFields[N]) -> AbstractContextManager[Any]:
    """The lock a change of ``graph`` holds: its own, and those of the graphs embedding it (taken outermost first), so
    that a graph embedding it changes wholly before or after too."""
    return graph._locked()


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
