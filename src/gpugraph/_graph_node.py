"""Node: one operation of a Graph, the object that ``Graph.add_*`` and the graph's queries return.

A Node is a handle: what the node does and its edges, its graph keeps (``gpugraph._graph_state.GraphState``), and
the Node reads them through the graph. What the graph reads and changes of a Node's own fields (its backend handle,
its record, its position), it does through the functions at the end here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ._attributes import KernelAttributes
from ._errors import GraphError
from ._memory import Array
from ._nodes import ChildGraphParams, NodeKind, Removed

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
            return ChildGraphParams(self.graph._child(self._handle))
        graph = self.graph
        i = graph._index(self)  # (first: it may read the graph again, replacing its Topology)
        return graph._topology.records[i]

    @property
    def bodies(self) -> tuple[Graph, ...]:
        """A conditional node's bodies, in the order of ``Graph.add_if`` (then, else), ``add_while`` (the body) or
        ``add_switch`` (body ``n`` for value ``n``): Graphs that belong to the node, to be filled with nodes.

        Raises:
            GraphError: If this is not a conditional node.
        """
        if self.kind is not NodeKind.CONDITIONAL:
            raise GraphError(f"{self!r}.bodies: only conditional nodes have bodies (got a {self.kind.value} node)")
        return self.graph._bodies[self._handle]

    @property
    def attributes(self) -> KernelAttributes:
        """A kernel node's attributes: priority, cooperative launch, L2 access policy window, cluster dims, memory
        synchronization domain (what the backend keeps: a node captured on a stream of priority ``p`` has priority
        ``p``).

        Raises:
            GraphError: If this is not a kernel node, or no longer in its graph.

        See also: cudaGraphKernelNodeGetAttribute.
        """
        return self.graph._attributes_of(self, "Node.attributes")

    @property
    def local_id(self) -> int:
        """The node's id in its graph: with ``graph.id`` it names the node, as the driver's DOT dump does (CUDA
        13.1; on an older driver, and on HIP, which has no such call, BackendError).

        Raises:
            GraphError: If the node is no longer in its graph.

        See also: cudaGraphNodeGetLocalId.
        """
        return self.graph._node_ids(self)[0]

    @property
    def tools_id(self) -> int:
        """The id profilers and other tools name the node by, unique in the process (CUDA 13.1, as ``local_id``).

        See also: cudaGraphNodeGetToolsId.
        """
        return self.graph._node_ids(self)[1]

    @property
    def dependencies(self) -> tuple[Node, ...]:
        """Nodes this node waits for."""
        return self.graph._neighbours(self, dependents=False)

    @property
    def dependents(self) -> tuple[Node, ...]:
        """Nodes that wait for this node."""
        return self.graph._neighbours(self, dependents=True)

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


def note_array(node: Node, array: Array) -> None:
    """``node``, an allocation node just added, allocates ``array`` (``Node.array``)."""
    node._array = array


def note_removed(node: Node) -> None:
    """``node`` was removed from its graph: its handle says so from now on (``why_gone`` explains it)."""
    node._handle = Removed()


def move_up(nodes: Iterable[Node], i: int) -> None:
    """Each of ``nodes`` (of one graph) after position ``i`` moves one place up: the node at ``i`` was removed."""
    for node in nodes:
        if node._i > i:
            node._i -= 1
