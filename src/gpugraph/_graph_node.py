"""Node: one operation of a Graph, the object that ``Graph.add_*`` and the graph's queries return.

A Node is a handle: what the node does and its edges, its graph keeps (``gpugraph._graph_state.GraphState``), and
the Node reads them through the graph's reads (``gpugraph._graph_reads``). What the graph reads and changes of a
Node's own fields (its backend handle, its record, its position, its Array), it does through the functions at the end
here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from . import _graph_reads
from ._attributes import KernelAttributes
from ._errors import GraphError
from ._memory import Array
from ._nodes import ChildGraphParams, NodeKind, Removed, why_gone

if TYPE_CHECKING:
    from ._graph import Graph
    from ._graph_state import GraphState


class Node:
    """One operation of a Graph; returned by the ``Graph.add_*`` methods and by queries.

    Attributes:
        graph: The Graph the node belongs to.
        kind: Its NodeKind.
    """

    __slots__ = ("graph", "kind", "_handle", "_i", "_number", "_record", "_array", "__weakref__")

    def __init__(self, graph: GraphState, handle: Any, i: int, record: Any, number: int) -> None:
        # (What the node does and its edges, the graph keeps: Graph._topology. Every GraphState is a Graph: it is
        # the state that Graph's concerns share, never made alone.)
        self.graph: Graph = graph  # type: ignore[assignment]
        self.kind: NodeKind = record.kind
        self._handle = handle
        self._i = i  # its position in the graph's Topology (kept current by Graph._load)
        self._number = number
        self._record = record  # (the latest: the graph's setters replace it) for repr, which never fails
        self._array: Array | None = None

    @property
    def params(self) -> Any:
        """The node's parameter record (``KernelParams``, ``MemcpyParams``, ...)."""
        if self.kind is NodeKind.GRAPH:
            return ChildGraphParams(_graph_reads.child(self.graph, self._handle))
        return _graph_reads.record(self.graph, self._handle)

    @property
    def bodies(self) -> tuple[Graph, ...]:
        """A conditional node's bodies, in the order of ``Graph.add_if`` (then, else), ``add_while`` (the body) or
        ``add_switch`` (body ``n`` for value ``n``): Graphs that belong to the node, to be filled with nodes.

        Raises:
            GraphError: If this is not a conditional node.
        """
        if self.kind is not NodeKind.CONDITIONAL:
            raise GraphError(f"{self!r}.bodies: only conditional nodes have bodies (got a {self.kind.value} node)")
        return cast("tuple[Graph, ...]", _graph_reads.embedded_graphs(self.graph, self._handle))

    @property
    def attributes(self) -> KernelAttributes:
        """A kernel node's attributes: priority, cooperative launch, L2 access policy window, cluster dims, memory
        synchronization domain (what the backend keeps: a node captured on a stream of priority ``p`` has priority
        ``p``).

        Raises:
            GraphError: If this is not a kernel node, or no longer in its graph.

        See also: cudaGraphKernelNodeGetAttribute.
        """
        return attributes_of(self, "Node.attributes")

    @property
    def local_id(self) -> int:
        """The node's id in its graph: with ``graph.id`` it names the node, as the driver's DOT dump does (CUDA
        13.1; on an older driver, and on HIP, which has no such call, BackendError).

        Raises:
            GraphError: If the node is no longer in its graph.

        See also: cudaGraphNodeGetLocalId.
        """
        return self._ids()[0]

    @property
    def tools_id(self) -> int:
        """The id profilers and other tools name the node by, unique in the process (CUDA 13.1, as ``local_id``).

        See also: cudaGraphNodeGetToolsId.
        """
        return self._ids()[1]

    def _ids(self) -> tuple[int, int]:
        graph = self.graph
        _graph_reads.position(graph, self._handle)  # (refuses a node no longer in the graph)
        return _graph_reads.backend(graph).node_ids(_graph_reads.handle(graph), self._handle)

    @property
    def dependencies(self) -> tuple[Node, ...]:
        """Nodes this node waits for."""
        return self._neighbours(dependents=False)

    @property
    def dependents(self) -> tuple[Node, ...]:
        """Nodes that wait for this node."""
        return self._neighbours(dependents=True)

    def _neighbours(self, dependents: bool) -> tuple[Node, ...]:
        graph = self.graph
        topology = _graph_reads.topology(graph)  # (first: a capture recording into the graph may have moved the node)
        i = _graph_reads.position(graph, self._handle)
        handles = topology.handles
        return tuple(_graph_reads.node_of(graph, handles[j])
                     for j in (topology.dependents(i) if dependents else topology.deps_of(i)))

    @property
    def array(self) -> Array:
        """The memory of an allocation node, usable by nodes ordered after it.

        Raises:
            GraphError: If this is not an allocation node.
        """
        if self._array is None:
            if self.kind is not NodeKind.MEM_ALLOC:
                raise GraphError(f"{self!r}.array: only allocation nodes have an array (got {self.kind})")
            raise GraphError(f"{self!r}.array: the allocation was recorded by stream capture; use the "
                             f"Array that Stream.alloc returned")
        return self._array

    def __repr__(self) -> str:
        detail = ""
        if self.kind is NodeKind.KERNEL:
            kernel = self._record.kernel
            detail = f" {getattr(kernel, 'name', kernel)}"
        return f"Node(n{self._number}, {self.kind.value}{detail})"


# What a Node's graph reads and changes of it (gpugraph's own: a Node's fields are private to its users).


def handle_of(node: Node) -> Any:
    """The backend handle of ``node``: what the backend's calls name the node by."""
    return node._handle


def number_of(node: Node) -> int:
    """The number of ``node`` in its graph (``n3`` in its repr), which no later node of the graph takes, though the
    backend may give a later node the handle of one removed."""
    return node._number


def note_record(node: Node, record: object) -> None:
    """``node`` has taken the parameter record ``record`` (a setter changed it; its graph's Topology notes it too):
    its repr shows it from now on."""
    node._record = record


def attributes_of(node: Node, what: str) -> KernelAttributes:
    """The attributes of the kernel node ``node`` (``what``: the call, for errors), read from the backend under the
    lock a change of its graph holds."""
    if node.kind is not NodeKind.KERNEL:
        raise GraphError(f"{what}: {node!r} is a {node.kind.value} node; only kernel nodes have attributes")
    graph = node.graph
    with _graph_reads.locked(graph):
        if not _graph_reads.has_node(graph, node):
            raise GraphError(f"{what}: {node!r} is no longer in this graph ({why_gone(node._handle)})")
        return _graph_reads.backend(graph).node_attributes(_graph_reads.handle(graph), node._handle)


def note_array(node: Node, array: Array) -> None:
    """``node``, an allocation node just added, allocates ``array`` (``Node.array``)."""
    node._array = array


def note_removed(node: Node) -> None:
    """``node`` was removed from its graph: its handle says so from now on (``why_gone`` explains it)."""
    node._handle = Removed()


def position_of(node: Node) -> int:
    """Where ``node`` was in its graph's Topology when last placed there (its graph checks the handle there before it
    trusts it: a reading of the graph may move nodes)."""
    return node._i


def place(node: Node, i: int) -> None:
    """``node`` is at position ``i`` of its graph's Topology (a reading of the graph moved it)."""
    node._i = i


def move_up(nodes: Iterable[Node], i: int) -> None:
    """Each of ``nodes`` (of one graph) after position ``i`` moves one place up: the node at ``i`` was removed."""
    for node in nodes:
        if node._i > i:
            node._i -= 1
