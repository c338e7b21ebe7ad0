"""GraphQuery: what a graph tells of itself: its nodes, edges, roots and leaves, a node's neighbours and ids,
clones and the lookup of a node in a clone (``find``), its missing edges (``hazards``), and its DOT descriptions
(``to_dot``, ``debug_dot_print``). What executable graphs, instantiate and update read of it is
``gpugraph._graph_reads``'s.

Each reads the graph's Topology (``GraphState._current``): no driver call but for the ids and the driver's DOT
dump.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._dot import DOT_FLAGS, to_dot, to_svg
from ._errors import GraphError
from ._graph_node import Node, handle_of, number_of
from ._graph_state import GraphState
from ._hazards import Hazard, find_hazards
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._nodes import NodeKind, Removed
from ._topology import Topology

if TYPE_CHECKING:
    from ._graph import Graph


class GraphQuery(GraphState):
    """Queries, clones and descriptions (a mixin of Graph: no state of its own)."""

    __slots__ = ()

    @property
    def id(self) -> int:
        """The graph's id, unique in the process, as the driver's DOT dump names it (CUDA 13.1; on an older
        driver BackendError). See also: cudaGraphGetId."""
        self._current()  # (refuses a graph that went with its node)
        return self._backend.graph_id(self._handle)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes, in creation order. See also: cudaGraphGetNodes."""
        return tuple(map(self._node, self._current().handles))

    @property
    def edges(self) -> tuple[tuple[Node, Node], ...]:
        """All edges as (from, to) pairs. See also: cudaGraphGetEdges."""
        topology = self._current()
        node, handles = self._node, topology.handles
        return tuple((node(handles[d]), node(handles[i])) for i, deps in enumerate(topology.deps) for d in deps)

    @property
    def roots(self) -> tuple[Node, ...]:
        """Nodes with no dependencies. See also: cudaGraphGetRootNodes."""
        topology = self._current()
        return tuple(self._node(h) for h, deps in zip(topology.handles, topology.deps) if not deps)

    @property
    def leaves(self) -> tuple[Node, ...]:
        """Nodes nothing depends on."""
        topology = self._current()
        waited_for = {dep for deps in topology.deps for dep in deps}
        return tuple(self._node(h) for i, h in enumerate(topology.handles) if i not in waited_for)

    def __len__(self) -> int:
        return len(self._current())

    def clone(self) -> Graph:
        """A copy of the graph; ``copy.find(node)`` maps this graph's nodes to the copy's.

        See also: cudaGraphClone.
        """
        if HOST_THREADS:
            refuse_in_host_function("Graph.clone")
        if self._memory:
            raise GraphError("clone: a graph with allocation or free nodes cannot be cloned")
        if self._holds(NodeKind.CONDITIONAL):
            raise GraphError(f"clone: {self!r} holds conditional nodes; a graph with conditional nodes cannot be "
                             f"cloned (CUDA refuses it); build it again instead")
        # The copy is described from this graph (creation order, which a clone keeps), not read node by node.
        backend, topology = self._backend, self._current()
        handle = backend.graph_clone(self._handle)
        copy = self._wrap(self.device, handle, topology=Topology.copy_of(topology, backend, handle))
        copy._copied_from(self, topology)
        return copy

    def _copied_from(self, source: GraphQuery, topology: Topology) -> None:
        """This graph was just cloned from ``source``, whose Topology was ``topology``: ``find`` maps source's nodes
        to its own, and it holds source's user objects too (the backend's clone holds references of its own)."""
        self._clone_of = weakref.ref(source)
        self._user_objects = dict(source._user_objects)
        # (By node number, which no later node takes, where a handle may be: the backend reuses a removed node's.)
        self._cloned = dict(zip(map(topology.number, range(len(topology))), self._topology.handles))

    def find(self, node: Node) -> Node:
        """The node of this clone that corresponds to ``node`` of the original graph.

        Raises:
            GraphError: If this graph is not a clone, ``node`` is not a node of the original, it was added to
                the original after the clone was made (it has no counterpart here), or either node was removed.

        See also: cudaGraphNodeFindInClone.
        """
        original = self._clone_of() if self._clone_of is not None else None
        if original is None:
            raise GraphError("find: this graph is not a clone")
        if not isinstance(node, Node) or node.graph is not original:
            raise GraphError(f"find: {node!r} is not a node of the graph this one was cloned from")
        if type(handle_of(node)) is Removed:
            raise GraphError(f"find: {node!r} was removed from the graph this one was cloned from (remove_node)")
        copy = self._cloned.get(number_of(node))
        if type(copy) is Removed:
            raise GraphError(f"find: the counterpart of {node!r} in this clone was removed (remove_node)")
        if copy is None:
            raise GraphError(f"find: {node!r} was added to the original graph after this clone was made, "
                             f"so the clone has no counterpart of it")
        return self._node(copy)

    def hazards(self) -> list[Hazard]:
        """The missing edges: every pair of nodes (those of its child graphs and conditional bodies too, each ordered as
        the node embedding it is) that touch the same memory, at least one writing, with no path of edges between
        them; and every node touching graph memory outside its allocation's lifetime (not ordered after its allocation
        node, or before the free node where the graph frees it). One ``Hazard`` per pair of nodes; ``str(hazard)`` says
        which edge orders them. What a node touches: a kernel its Array and Param arguments (those of ``const``
        pointer parameters read, the others written); a copy or memset its exact rows; a host node the Arrays and NumPy
        arrays among its arguments, written, or what ``add_host(reads=, writes=)`` declared; a memory operation its
        element. An edge of any kind counts as ordering (see ``add_dependency``).
        """
        return find_hazards(self)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT format."""
        return to_dot(self)

    def to_svg(self, path: str | os.PathLike[str] | None = None, *,
               hazards: bool | Iterable[Hazard] | None = None) -> str:
        """The graph drawn by Graphviz as an SVG document (the picture ``to_dot`` describes: shapes and fills by node
        kind, child graphs and conditional bodies as clusters, edges by dependency kind), also written to the file
        ``path`` where given. ``hazards``: a list of Hazards (from ``hazards()``) outlines each one's two nodes in
        red and joins them with a red dashed edge; True marks those ``hazards()`` finds.

        Raises:
            ImportError: If the graphviz Python package is not installed (``pip install graphviz``; the ``svg``
                extra).
            RuntimeError: If Graphviz's ``dot`` program is not on PATH (the system package graphviz).
            TypeError: If ``path`` or ``hazards`` is of the wrong type.
            ValueError: If a hazard names a node that is not in this graph.
        """
        if path is not None and not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"to_svg(path): expected a str, a path or None, got {type(path).__name__}")
        if hazards is None or hazards is False:
            marked: list[Hazard] = []
        elif hazards is True:
            marked = self.hazards()
        elif isinstance(hazards, Iterable) and not isinstance(hazards, (str, bytes)):
            marked = list(hazards)
            wrong = [hazard for hazard in marked if not isinstance(hazard, Hazard)]
            if wrong:
                raise TypeError(f"to_svg(hazards): expected gpugraph Hazards (from Graph.hazards()), got "
                                f"{type(wrong[0]).__name__} {wrong[0]!r}")
        else:
            raise TypeError(f"to_svg(hazards): expected None, True, or a list of Hazards (from Graph.hazards()), "
                            f"got {type(hazards).__name__} {hazards!r}")
        return to_svg(self, path, marked)

    def debug_dot_print(self, path: str | os.PathLike[str], flags: Iterable[str] = ()) -> None:
        """Write the backend's own DOT description of the graph to the file ``path``: the driver's on CUDA, with what
        ``flags`` (names of ``gpugraph.DOT_FLAGS``: "verbose", "kernel_node_params", ...) add; gpugraph's
        ``to_dot`` on the CPU backend, which has no driver (the flags are checked and add nothing there).

        See also: cudaGraphDebugDotPrint.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"debug_dot_print(path): expected a str or path, got {type(path).__name__}")
        if isinstance(flags, str):
            raise TypeError(f"debug_dot_print(flags): expected an iterable of flag names, got the str {flags!r}")
        flags = tuple(flags)
        unknown = [flag for flag in flags if flag not in DOT_FLAGS]
        if unknown:
            raise ValueError(f"debug_dot_print(flags): unknown flag {unknown[0]!r}; the flags are "
                             f"{', '.join(DOT_FLAGS)}")
        path = os.fspath(path)
        self._current()  # (refuses a graph that went with its node)
        if HOST_THREADS:
            refuse_in_host_function("Graph.debug_dot_print")
        if not self._backend.graph_debug_dot(self._handle, path, flags):
            with open(path, "w") as file:
                file.write(to_dot(self))
