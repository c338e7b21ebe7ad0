"""GraphEdit: changing a graph after its nodes were added: its edges (``add_dependency``,
``remove_dependency``, ``dependency_kind``), removing nodes, the ``set_*`` setters and kernel-node attributes
(each with the rules of the ``add_*`` call it mirrors), and the user objects the graph holds.

Executable graphs made earlier keep what they were made with; each change tells them first
(``GraphState._begin_change``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _graph_reads
from ._attributes import _KEEP, KernelAttributes, attributes_with, device_limits, launch_refusal
from ._conditions import set_reader
from ._device import Device
from ._errors import GraphError
from ._event import Event
from ._exec_state import attributes_changing
from ._graph_alloc import GraphAlloc
from ._graph_node import Node, attributes_of, handle_of, move_up, note_record, note_removed
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._interrupts import without_interrupts
from ._kernel import Kernel
from ._memops import mem_ops_record
from ._memory import Array
from ._nesting import nesting_refusal
from ._nodes import DEPENDENCY_KINDS, SEMAPHORE_KINDS, ChildGraphParams, KernelParams, NodeKind, Removed, why_gone
from ._placement import sibling
from ._records import event_record, host_record, kernel_record, memcpy_record, memset_record
from ._scalars import as_bool, describe
from ._semaphores import semaphore_record
from ._topology import Topology
from ._user_objects import UserObject, count_of, handing_to_graph, of_backend, user_object_handle

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class GraphEdit(GraphAlloc):
    """Edges, removals, setters and user objects (a mixin of Graph: no state of its own)."""

    __slots__ = ()

    # Edges

    def _edge_nodes(self, a: Node, b: Node, what: str) -> None:
        for name, node in (("from", a), ("to", b)):
            if not isinstance(node, Node):
                raise TypeError(f"{what}: expected Nodes, got {type(node).__name__} for '{name}'")
            self._check_in_graph(node, what)

    def _check_in_graph(self, node: Node, what: str) -> None:
        """Refuse ``node`` (a Node) unless it is one of this graph's and still in it."""
        if node.graph is not self:
            raise GraphError(f"{what}: {node!r} belongs to another graph")
        if not self._has(node):
            raise GraphError(f"{what}: {node!r} is no longer in this graph ({why_gone(handle_of(node))})")

    def _change_edge(self, a: Node, b: Node, add: bool, kind: str = "full") -> None:
        """Add (of ``kind``) or remove the edge from ``a`` to ``b`` in the backend graph and the Topology
        (checked)."""
        with self._locked():
            self._begin_change()
            source, target = self._index(a), self._index(b)
            if add:
                self._backend.graph_add_dependency(self._handle, handle_of(a), handle_of(b), kind)
                self._topology.add_edge(source, target)
            else:
                self._backend.graph_remove_dependency(self._handle, handle_of(a), handle_of(b))
                self._topology.remove_edge(source, target)
            self._end_change()

    def add_dependency(self, a: Node, b: Node, kind: str = "full") -> None:
        """Make ``b`` wait for ``a``. ``kind`` (one of ``gpugraph.DEPENDENCY_KINDS``) says for what: "full", until
        ``a`` has finished; between two kernel nodes also "programmatic" (programmatic dependent launch: ``b`` may
        start once every block of ``a`` has called ``cudaTriggerProgrammaticLaunchCompletion()`` or exited, and
        its ``cudaGridDependencySynchronize()`` waits for ``a`` to finish and its writes to show) or
        "launch_order" (``b`` may start once every block of ``a`` has started). The CPU backend runs every edge
        as a full one, which each kind allows.

        Raises:
            ValueError: If ``kind`` is not one of DEPENDENCY_KINDS.
            GraphError: If the edge exists already (of any kind), would close a cycle, or is programmatic or
                launch-order between nodes that are not both kernel nodes.

        See also: cudaGraphAddDependencies (its edge data: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, ...).
        """
        if kind not in DEPENDENCY_KINDS:
            raise ValueError(f"add_dependency(kind): expected one of {', '.join(DEPENDENCY_KINDS)}, got {kind!r}")
        self._edge_nodes(a, b, "add_dependency")
        if kind != "full" and (a.kind is not NodeKind.KERNEL or b.kind is not NodeKind.KERNEL):
            raise GraphError(f"add_dependency({a!r}, {b!r}, kind={kind!r}): a {kind} edge joins two kernel nodes; "
                             f"got a {a.kind.value} node to a {b.kind.value} node")
        if a is b or self._reaches(b, [a]):
            raise GraphError(f"add_dependency({a!r}, {b!r}): {b!r} already comes before {a!r}; "
                             f"the edge would make a cycle")
        source, target = self._index(a), self._index(b)
        if source in self._topology.deps_of(target):
            raise GraphError(f"add_dependency({a!r}, {b!r}): the edge exists already")
        self._change_edge(a, b, add=True, kind=kind)

    def dependency_kind(self, a: Node, b: Node) -> str:
        """The kind of the edge from ``a`` to ``b`` (see ``add_dependency``).

        Raises:
            GraphError: If ``b`` does not wait for ``a`` directly.

        See also: cudaGraphGetEdges, cudaGraphNodeGetDependencies (their edge data).
        """
        self._edge_nodes(a, b, "dependency_kind")
        if self._index(a) not in self._current().deps_of(self._index(b)):
            raise GraphError(f"dependency_kind({a!r}, {b!r}): {b!r} does not wait for {a!r} directly")
        return self._backend.graph_dependency_kind(self._handle, handle_of(a), handle_of(b))

    def remove_dependency(self, a: Node, b: Node) -> None:
        """Remove the edge from ``a`` to ``b``. See also: cudaGraphRemoveDependencies."""
        self._edge_nodes(a, b, "remove_dependency")
        if self._memory:
            raise GraphError("remove_dependency: edges of a graph with allocation or free nodes cannot be removed")
        topology = self._current()  # (first: a capture recording into the graph may have moved the nodes)
        source, target = self._index(a), self._index(b)
        if source not in topology.deps_of(target):
            raise GraphError(f"remove_dependency({a!r}, {b!r}): there is no such edge")
        self._change_edge(a, b, add=False)

    # Changing and removing nodes

    def _own_node(self, node: object, kinds: tuple[NodeKind, ...] | None, what: str) -> int:
        """The position of ``node``, checked to be a Node of this graph, still in it, of one of ``kinds`` (None: of any
        kind), at a time the graph's nodes may change."""
        if not isinstance(node, Node):
            raise TypeError(f"{what}(node): expected a Node, got {type(node).__name__}")
        self._check_in_graph(node, what)
        if kinds is not None and node.kind not in kinds:
            names = " or ".join(k.value for k in kinds)
            raise GraphError(f"{what}({node!r}): the node is a {node.kind.value} node, not a {names} node")
        if self._recording:
            raise GraphError(f"{what}: a capture records into this graph (Stream.capture(into=...)); change its "
                             f"nodes once the capture has ended")
        return self._index(node)

    def remove_node(self, node: Node) -> None:
        """Remove ``node`` and its edges: nodes that waited for it no longer do.

        Executable graphs made earlier keep the node; their setters refuse it from now on (CUDA's address an
        executable graph's nodes through the graph's). A child-graph node's embedded graph and a conditional node's
        bodies go with it: Graphs over them can no longer be used, and the conditional node's Condition is read by
        no node (an instantiate refuses it until another node reads it).

        Raises:
            GraphError: If the graph has allocation or free nodes (CUDA refuses it), a capture records into it, or
                an executable graph made from it patches the node's Params through it.

        See also: cudaGraphDestroyNode.
        """
        with self._locked():  # (checked under it: another thread's change would move the node)
            self._own_node(node, None, "remove_node")
            if self._memory:
                raise GraphError(f"remove_node({node!r}): nodes of a graph with allocation or free nodes cannot be "
                                 f"removed (CUDA refuses it)")
            handle = handle_of(node)
            exe = self._patched_by(handle)
            if exe is not None:
                raise GraphError(f"remove_node({node!r}): {exe!r}, made from this graph, patches the node's "
                                 f"Params through it; close that executable graph first")
            self._begin_change()
            i = self._index(node)

            def remove() -> None:  # (whole or not at all: the backend may give its handle to the next node)
                self._backend.graph_destroy_node(self._handle, handle)
                self._tell_removed(handle)
                note_removed(node)
                self._forget(handle, i)

            without_interrupts(remove)
            self._end_change()

    def _forget(self, handle: Any, i: int) -> None:
        """Drop what the graph keeps of the node ``handle`` at position ``i``, which the backend has removed."""
        record = self._topology.records[i]
        self._topology.remove(i)
        self._nodes.pop(handle, None)
        move_up(self._nodes.values(), i)
        if record.kind is NodeKind.GRAPH and self._children is not None:
            child = self._children.pop(handle, None)
            if child is not None:
                child._die("was embedded in a node that was removed from its graph (remove_node)")
        elif record.kind is NodeKind.CONDITIONAL:
            for body in self._bodies.pop(handle, ()):
                body._die("was a body of a conditional node that was removed from its graph (remove_node)")
            set_reader(record.condition, None)
        if self._cloned:  # (a clone's node: the original's counterpart of it has none now)
            gone = Removed()
            self._cloned = {number: gone if type(copy) is not Removed and copy == handle else copy
                            for number, copy in self._cloned.items()}

    def _die(self, why: str) -> None:
        """The backend graph under this Graph went with the node that embedded it (``why``: how); every later use is
        refused."""
        self._dead = f"this graph (of {self.device}) {why}, and went with it; it can no longer be used"
        self._stale = True  # (every reading goes through _load, which refuses it)
        for graph in [*(self._children.values() if self._children is not None else ()),
                      *(body for bodies in self._bodies.values() for body in bodies)]:
            graph._die(why)

    def _set_record(self, node: Node, record: Any) -> None:
        """Give ``node`` (checked by ``_own_node``, under ``_locked``) the parameter record ``record``, in the backend
        and the Topology."""
        self._begin_change()
        i = self._index(node)

        def set_record() -> None:  # (whole or not at all: a reading again would keep the old record)
            self._backend.graph_set_node(self._handle, handle_of(node), record)
            self._topology.set_record(i, record)
            note_record(node, record)

        without_interrupts(set_record)
        self._end_change()

    def set_params(self, node: Node, *args: Any, grid: Any = None, block: Any = None, shared_mem: int | None = None,
                   kernel: Kernel | None = None) -> None:
        """Change a kernel node's arguments (all of them, or none to keep them), launch shape, shared memory or
        kernel, with the rules of ``add_kernel``. Executable graphs made earlier keep what they were made with.

        See also: cudaGraphKernelNodeSetParams.
        """
        with self._locked():
            i = self._own_node(node, (NodeKind.KERNEL,), "set_params")
            old = self._topology.records[i]
            device = sibling(self.device, old.device)
            record = kernel_record(old, args, grid, block, shared_mem, kernel, device, self, "set_params")
            self._refuse_body_params(record, "set_params")
            if (record.grid, record.block, record.shared_mem, record.kernel) != (old.grid, old.block, old.shared_mem,
                                                                                 old.kernel):
                attributes = self._backend.node_attributes(self._handle, handle_of(node))
                self._check_launch(node, attributes, record, "set_params")
            self._set_record(node, record)
            record.kernel.bind_params(record.args)

    # Kernel node attributes

    def _check_launch(self, node: Node, attributes: KernelAttributes, record: KernelParams, what: str) -> None:
        """Refuse a kernel node of ``attributes`` launching as ``record`` says (``_attributes.launch_refusal``)."""
        device = sibling(self.device, record.device)
        if attributes.cooperative and type(record.kernel) is not Kernel:
            raise ValueError(f"{what}({node!r}): the node is cooperative, and gpugraph cannot tell how many blocks of "
                             f"another library's kernel ({record.kernel.name}) the device holds at once")
        x, y, z = record.block
        # (How many blocks of that shape the device holds at once: what a cooperative launch may have.)
        refusal = launch_refusal(attributes, record.grid, record.block, lambda: self._backend.kernel_cooperative_blocks(
            device.index, record.kernel, x * y * z, record.shared_mem))
        if refusal is not None:
            raise ValueError(f"{what}({node!r}): {refusal}")

    def set_attributes(self, node: Node, *, priority: int = _KEEP, cooperative: bool = _KEEP,
                       access_policy_window: Any = _KEEP, cluster_dims: Any = _KEEP,
                       mem_sync_domain: str = _KEEP) -> None:
        """Change attributes of a kernel node (those given; see ``KernelAttributes``). Executable graphs made earlier
        keep what they were made with; ``GraphExec.update`` takes them, but for ``cooperative``, and ``priority``
        where the executable graph was instantiated with ``use_node_priority``.

        Raises:
            TypeError, ValueError: If a value breaks its rule (``KernelAttributes``), or the node's launch shape does
                not fit them (cluster dims that do not divide its grid; a cooperative grid larger than the device
                holds at once).
            GraphError: If the node is not a kernel node of this graph.

        See also: cudaGraphKernelNodeSetAttribute.
        """
        changes = {"priority": priority, "cooperative": cooperative, "access_policy_window": access_policy_window,
                   "cluster_dims": cluster_dims, "mem_sync_domain": mem_sync_domain}
        with self._locked():
            i = self._own_node(node, (NodeKind.KERNEL,), "set_attributes")
            record = self._topology.records[i]
            handle = handle_of(node)
            old = self._backend.node_attributes(self._handle, handle)
            new = attributes_with(old, changes, device_limits(sibling(self.device, record.device)),
                                  "set_attributes")
            self._check_launch(node, new, record, "set_attributes")
            if new != old:
                self._begin_change()
                attributes_changing(self, handle, old)
                without_interrupts(lambda: self._backend.node_set_attributes(self._handle, handle, new))
                self._end_change()

    def copy_attributes(self, src: Node, dst: Node) -> None:
        """Give kernel node ``dst`` of this graph the attributes of kernel node ``src`` (of any graph of the same
        device), with the rules of ``set_attributes``.

        See also: cudaGraphKernelNodeCopyAttributes.
        """
        if not isinstance(src, Node):
            raise TypeError(f"copy_attributes(src): expected a Node, got {type(src).__name__}")
        attributes = attributes_of(src, "copy_attributes(src)")
        source = src.params
        with self._locked():
            i = self._own_node(dst, (NodeKind.KERNEL,), "copy_attributes")
            record = self._topology.records[i]
            if src.graph.device.backend != self.device.backend or source.device != record.device:
                raise ValueError(f"copy_attributes({src!r}, {dst!r}): the nodes run on different devices "
                                 f"({sibling(src.graph.device, source.device)} and "
                                 f"{sibling(self.device, record.device)})")
            self._check_launch(dst, attributes, record, "copy_attributes")
            handle = handle_of(dst)
            old = self._backend.node_attributes(self._handle, handle)
            self._begin_change()
            attributes_changing(self, handle, old)
            without_interrupts(lambda: self._backend.node_copy_attributes(self._handle, handle,
                                                                          _graph_reads.handle(src.graph),
                                                                          handle_of(src)))
            self._end_change()

    # Setters of the other kinds

    def set_memcpy(self, node: Node, dst: Any, src: Any, nbytes: int | None = None, *, shape: Any = None,
                   dst_origin: Any = None, src_origin: Any = None) -> None:
        """Change a copy node, with the rules of ``add_memcpy``. See also: cudaGraphMemcpyNodeSetParams."""
        record = memcpy_record(self.device, dst, src, nbytes, "set_memcpy", shape=shape, dst_origin=dst_origin,
                               src_origin=src_origin)
        with self._locked():
            self._own_node(node, (NodeKind.MEMCPY,), "set_memcpy")
            self._check_freed_memory_use((record.dst, record.src), list(node.dependencies), f"set_memcpy({node!r})",
                                         node)
            self._set_record(node, record)

    def set_memset(self, node: Node, dst: Array, value: Any, count: int | None = None, *, shape: Any = None,
                   origin: Any = None) -> None:
        """Change a memset node, with the rules of ``add_memset``; ``dst`` is on the device of the memory the node
        set (a memset node runs there). See also: cudaGraphMemsetNodeSetParams."""
        record = memset_record(self.device, dst, value, count, "set_memset", shape=shape, origin=origin)
        with self._locked():
            i = self._own_node(node, (NodeKind.MEMSET,), "set_memset")
            was, now = getattr(self._topology.records[i].dst, "device", None), getattr(dst, "device", None)
            if isinstance(was, Device) and isinstance(now, Device) and was is not now:
                raise GraphError(f"set_memset({node!r}): the node sets memory of {was}, where it runs, and dst is on "
                                 f"{now}; add a memset node for that memory instead")
            self._check_freed_memory_use((record.dst,), list(node.dependencies), f"set_memset({node!r})", node)
            self._set_record(node, record)

    def set_host(self, node: Node, fn: Callable[..., Any], *args: Any) -> None:
        """Change a host node's callable and arguments. See also: cudaGraphHostNodeSetParams."""
        record = host_record(fn, args, "set_host")
        with self._locked():
            self._own_node(node, (NodeKind.HOST,), "set_host")
            self._set_record(node, record)

    def set_event(self, node: Node, event: Event) -> None:
        """Change the event of an event record or wait node, with the rules of ``add_event_record`` and
        ``add_event_wait``.

        See also: cudaGraphEventRecordNodeSetEvent, cudaGraphEventWaitNodeSetEvent.
        """
        with self._locked():
            self._own_node(node, (NodeKind.EVENT_RECORD, NodeKind.EVENT_WAIT), "set_event")
            self._set_record(node, event_record(self.device, node.kind, event, "set_event"))

    def set_semaphores(self, node: Node, semaphores: Any, values: Any = None) -> None:
        """Change the semaphores and values of a semaphore signal or wait node, with the rules of
        ``add_semaphore_signal`` and ``add_semaphore_wait``.

        See also: cudaGraphExternalSemaphoresSignalNodeSetParams, cudaGraphExternalSemaphoresWaitNodeSetParams.
        """
        with self._locked():
            self._own_node(node, SEMAPHORE_KINDS, "set_semaphores")
            self._set_record(node, semaphore_record(self.device, node.kind, semaphores, values, "set_semaphores"))

    def set_mem_ops(self, node: Node, ops: Any) -> None:
        """Change the operations of a batch memory-op node, with the rules of ``add_mem_ops``.

        See also: hipGraphBatchMemOpNodeSetParams, cuGraphBatchMemOpNodeSetParams.
        """
        record = mem_ops_record(self.device, ops, "set_mem_ops")
        with self._locked():
            self._own_node(node, (NodeKind.MEM_OPS,), "set_mem_ops")
            self._set_record(node, record)

    def set_child_graph(self, node: Node, graph: Self) -> None:
        """Make a child-graph node embed a copy of ``graph``, taken now (of any topology), with the rules of
        ``add_child``. A Graph over the copy it embedded before (``node.params.graph``) can no longer be used.

        See also: cudaGraphNodeSetParams (a child-graph node's parameters).
        """
        self._check_child(graph, "set_child_graph")
        refusal = nesting_refusal(self, graph)
        if refusal is not None:
            raise GraphError(f"set_child_graph: {refusal}")
        with self._locked():
            self._own_node(node, (NodeKind.GRAPH,), "set_child_graph")
            self._begin_change()
            i, backend, handle = self._index(node), self._backend, handle_of(node)

            def set_child() -> None:  # (whole or not at all: the node embeds a new copy)
                backend.graph_set_node(self._handle, handle, ChildGraphParams(_graph_reads.handle(graph)))
                record = backend.node_params(self._handle, handle)  # (the copy the node embeds now)
                self._topology.set_record(i, record)
                self._topology.children[i] = Topology.copy_of(_graph_reads.topology(graph), backend, record.graph)
                note_record(node, record)
                old = self._children.pop(handle, None) if self._children is not None else None
                if old is not None:
                    old._die("was embedded in a child-graph node that set_child_graph gave another graph")

            without_interrupts(set_child)
            self._end_change()

    # User objects

    def retain_user_object(self, obj: UserObject, count: int = 1, move: bool = False) -> None:
        """Let the graph hold ``count`` references to ``obj``: new ones, or, with ``move``, the caller's. Its clones,
        child-graph nodes embedding it and executable graphs made from it hold them too, until their work is done.

        Raises:
            GraphError: If ``obj`` is of another backend, or the caller holds no reference (fewer than ``count``
                with ``move``).

        See also: cudaGraphRetainUserObject (cudaGraphUserObjectMove).
        """
        if type(obj) is not UserObject:
            raise TypeError(f"retain_user_object(obj): expected a UserObject (Device.user_object), got "
                            f"{type(obj).__name__}")
        count = count_of(count, "retain_user_object")
        if as_bool(move) is None:
            raise TypeError(f"retain_user_object(move): expected a bool, got {describe(move)}")
        move = bool(move)
        if not of_backend(obj, self._backend):
            raise GraphError(f"retain_user_object: {obj!r} is of another backend than {self!r}")
        if HOST_THREADS:
            refuse_in_host_function("Graph.retain_user_object")
        self._current()  # (refuses a graph that went with its node)
        with handing_to_graph(obj, count, move, self._lock, "retain_user_object") as handle:
            self._backend.graph_retain_user_object(self._handle, handle, count, move)
            self._user_objects[obj] = self._user_objects.get(obj, 0) + count

    def release_user_object(self, obj: UserObject, count: int = 1) -> None:
        """Release ``count`` of the references the graph holds to ``obj`` (its copies and executable graphs keep
        theirs).

        Raises:
            GraphError: If the graph holds fewer than ``count``.

        See also: cudaGraphReleaseUserObject.
        """
        if type(obj) is not UserObject:
            raise TypeError(f"release_user_object(obj): expected a UserObject, got {type(obj).__name__}")
        count = count_of(count, "release_user_object")
        if HOST_THREADS:
            refuse_in_host_function("Graph.release_user_object")
        self._current()
        with self._lock:
            held = self._user_objects.get(obj, 0)
            if count > held:
                raise GraphError(f"release_user_object({obj!r}, {count}): the graph holds {held} reference(s)")
            self._backend.graph_release_user_object(self._handle, user_object_handle(obj), count)
            if held == count:
                del self._user_objects[obj]
            else:
                self._user_objects[obj] = held - count
