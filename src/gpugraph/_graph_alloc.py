"""GraphAlloc: graph memory: allocation and free nodes (``Graph.add_alloc``, ``Graph.add_free``) and the
rules CUDA applies to them when they are added (a free ordered after its allocation, freed once; none in a
child graph or a conditional node's body; one executable graph at a time), and to a copy or memset of memory its
graph frees (``_check_freed_memory_use``, which ``GraphBuild`` calls: it adds nodes over this mixin).

The rules of launching a graph with memory nodes are the backends' (``backends/_graph_memory.py``).
"""

from __future__ import annotations

from typing import Any

from ._device import Device
from ._errors import GraphError
from ._graph_node import Node, handle_of, note_array
from ._graph_state import GraphState
from ._memory import Array, allocation_of, normalize_dtype, normalize_shape
from ._nodes import NodeKind
from ._placement import graph_node_device
from .backends import get_backend


class GraphAlloc(GraphState):
    """Allocation and free nodes, and the lifetime rules of nodes using graph memory (a mixin of Graph: no state of its
    own)."""

    __slots__ = ()

    def add_alloc(self, shape: Any, dtype: Any, after: Any = (), access: Any = (),
                  device: Device | None = None) -> Node:
        """Add a graph-memory allocation node; ``node.array`` is usable by nodes ordered after it.

        ``device``: the device whose memory it is, any of the graph's backend (None: the graph's), as a kernel
        node's ``device``. ``access``: other devices (a Device or several) whose kernels and kernel nodes may
        use it too, for reading and writing (the only access CUDA gives graph memory); a kernel node of the
        graph's device using memory of another device needs that device here.

        Raises:
            TypeError: If ``access`` holds something other than Devices, or ``device`` is not a Device.
            ValueError: If ``access`` names the allocation's device, a device of another backend, or one that
                the hardware does not let reach the allocation's device; or ``device`` is of another backend.

        See also: cudaGraphAddMemAllocNode (poolProps.location, accessDescs), hipMemPoolSetAccess.
        """
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        device = graph_node_device(self.device, device, "add_alloc")
        sharers = _sharers(device, access, "add_alloc")
        self._check_memory_allowed("add_alloc")
        deps = self._deps(after, "add_alloc")
        with self._locked():
            positions = self._begin_change(deps, "add_alloc")
            backend = self._backend
            handle, ptr, alloc = backend.graph_add_alloc(self._handle, Array.bytes_for(shape, dtype),
                                                         [handle_of(node) for node in deps], device.index, sharers)
            node = self._adopt(handle, backend.node_params(self._handle, handle), positions, alloc)
            note_array(node, Array(device, ptr, shape, dtype, alloc))
            self._end_change()
            return node

    def add_free(self, allocation: Node | Array, after: Any = ()) -> Node:
        """Add a node freeing a graph allocation (an allocation node of this graph, or its Array).

        Raises:
            GraphError: If ``allocation`` is not an allocation, is freed twice in this graph, or the free
                is not ordered after its allocation node.

        See also: cudaGraphAddMemFreeNode.
        """
        self._check_memory_allowed("add_free")
        alloc = self._freed_allocation(allocation)
        deps = self._deps(after, "add_free")
        with self._lock:
            self._locate(deps, "add_free")
        alloc_node = None
        # Allocations are told apart by the backend's record, not by address: CUDA gives an allocation
        # made after a free the freed allocation's address.
        topology = self._current()
        for i, allocated in topology.allocs.items():
            if allocated is alloc:
                node = self._node(topology.handles[i])
                if node.kind is NodeKind.MEM_FREE:
                    raise GraphError(f"add_free: {alloc.owner} is already freed by {node!r} (double free)")
                alloc_node = node
        if alloc_node is not None and not self._reaches(alloc_node, deps):
            raise GraphError(f"add_free: the free must be ordered after {alloc_node!r}; "
                             f"pass after= that node or one that follows it")
        with self._locked():
            positions = self._begin_change(deps, "add_free")
            backend = self._backend
            handle = backend.graph_add_free(self._handle, alloc, [handle_of(node) for node in deps])
            node = self._adopt(handle, backend.node_params(self._handle, handle), positions, alloc)
            self._end_change()
            return node

    def _freed_allocation(self, allocation: Any) -> Any:
        """The allocation record ``add_free(allocation)`` frees: of an allocation node of this graph, or of a
        graph allocation's Array."""
        if isinstance(allocation, Node):
            if allocation.graph is not self:
                raise GraphError(f"add_free: {allocation!r} belongs to another graph; pass its Array instead")
            if allocation.kind is not NodeKind.MEM_ALLOC:
                raise GraphError(f"add_free({allocation!r}): the node is a {allocation.kind.value} node, "
                                 f"not an allocation (got {allocation.kind})")
            return allocation_of(allocation.array)
        if type(allocation) is Array:
            if allocation_of(allocation).origin != "graph":
                raise GraphError(f"add_free: {allocation.ptr:#x} is not the address of a graph allocation "
                                 f"(got {allocation_of(allocation).owner})")
            return allocation_of(allocation)
        raise TypeError(f"add_free: expected an allocation Node or an Array, got {type(allocation).__name__}")

    def _check_memory_allowed(self, what: str) -> None:
        self._refuse_in_body(what, "allocation or free")
        if self._owner is not None:
            raise GraphError(f"{what}: this graph is embedded in a child-graph node; "
                             f"child graphs cannot hold allocation or free nodes")
        if len(self._live_execs):
            raise GraphError(f"{what}: a graph with memory nodes may have only one executable graph; "
                             f"close the one instantiated from this graph first")

    def _check_freed_memory_use(self, operands: tuple[object, ...], deps: list[Node], what: str,
                                node: Node | None = None) -> None:
        """CUDA's rule for a copy or memset node of graph memory that its graph frees: it must come after the
        allocation node and before the free node, so none can be added once the free node is in the graph (a node
        added then is not before it), and a node changed to copy or set it (``node``, after ``deps``) must lie
        between the two. CUDA refuses such a node otherwise (CUDA_ERROR_INVALID_VALUE from cuGraphAddMemsetNode /
        cuGraphAddMemcpyNode, measured on an H100, driver 580); it takes one of memory the graph does not free
        unordered, and leaves kernels, whose pointers it cannot see, to the hazard check. Allocations are told apart by
        their records (an allocation after a free may take its address).

        Raises:
            GraphError: Naming the operand, the allocation and free nodes and what to do instead.
        """
        topology = self._current()
        if not topology.memory:
            return
        for operand in operands:
            if type(operand) is not Array:
                continue
            start, end = operand.ptr, operand.ptr + operand.nbytes
            # Each allocation holding the operand: its allocation node and its free node in this graph (either may be
            # missing: memory allocated elsewhere may be freed here).
            lives: dict[int, dict[NodeKind, Node]] = {}
            for i, record in topology.allocs.items():
                if record.ptr <= start and end <= record.ptr + record.nbytes:
                    found = self._node(topology.handles[i])
                    lives.setdefault(id(record), {})[found.kind] = found
            if not any(NodeKind.MEM_FREE in life for life in lives.values()) or any(
                    self._within(life, deps, node) for life in lives.values()):
                continue
            allocation, free = next((life.get(NodeKind.MEM_ALLOC), life[NodeKind.MEM_FREE])
                                    for life in reversed(lives.values()) if NodeKind.MEM_FREE in life)
            if node is None:
                raise GraphError(f"{what}: {operand!r} is graph memory that {free!r} frees, and a copy or memset of it "
                                 f"must be ordered before that free (CUDA refuses it otherwise), which a node added "
                                 f"after the free node is not; add the copy or memset before the free node (after "
                                 f"{allocation!r}), then the free after it")
            raise GraphError(f"{what}: {operand!r} is graph memory that this graph allocates with {allocation!r} and "
                             f"frees with {free!r}, and a copy or memset of it must be ordered after the allocation "
                             f"and before the free (CUDA refuses it otherwise), which this node is not; change a node "
                             f"that lies between them")

    def _within(self, life: dict[NodeKind, Node], deps: list[Node], node: Node | None) -> bool:
        """Whether ``node`` (after ``deps``; None: a node about to be added after them) runs within the allocation
        ``life`` gives (its allocation and free nodes in the graph): after its allocation node, where the graph has
        one, and before its free node, where the graph has one."""
        allocation, free = life.get(NodeKind.MEM_ALLOC), life.get(NodeKind.MEM_FREE)
        return ((allocation is None or self._reaches(allocation, deps))
                and (free is None or (node is not None and self._reaches(node, [free]))))


def _sharers(device: Device, access: Any, what: str) -> tuple[int, ...]:
    """The indices of the devices ``access`` names (a Device or several) that may use an allocation of ``device``:
    other devices of its backend that the hardware lets reach it."""
    if isinstance(access, str):
        raise TypeError(f"{what}(access=): expected a Device or an iterable of Devices, got the str {access!r}")
    devices = [access] if isinstance(access, Device) else access
    try:
        devices = list(devices)
    except TypeError:
        raise TypeError(f"{what}(access=): expected a Device or an iterable of Devices, "
                        f"got {type(access).__name__}") from None
    for peer in devices:
        if not isinstance(peer, Device):
            raise TypeError(f"{what}(access=): expected Devices, got {type(peer).__name__}")
        if peer is device:
            raise ValueError(f"{what}(access=): {peer} is the allocation's own device, which always has access")
        if peer.backend != device.backend:
            raise ValueError(f"{what}(access=): {peer} is a device of another backend than {device}")
    backend = get_backend(device.backend)
    for peer in devices:
        if not backend.device_can_access_peer(peer.index, device.index):
            raise ValueError(f"{what}(access=): {peer} cannot access memory of {device}: the hardware allows "
                             f"no peer access between them (cudaDeviceCanAccessPeer)")
    return tuple(sorted({peer.index for peer in devices}))
