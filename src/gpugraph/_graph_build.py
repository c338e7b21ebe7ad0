"""GraphBuild: the ``Graph.add_*`` methods of the nodes that run work: kernels, copies, memsets, host calls,
empty nodes, child graphs, event records and waits, semaphore signals and waits, batch memory operations.

(Conditional nodes are ``_graph_conditional``'s, allocation and free nodes ``_graph_alloc``'s.) Each checks its
arguments with the record builders that the setters and executable graphs share (``_records``, ``_memops``,
``_semaphores``), then adds the node with ``GraphState._add``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _graph_reads
from ._device import Device
from ._errors import GraphError
from ._event import Event
from ._graph_alloc import GraphAlloc
from ._graph_node import Node
from ._hazards import CHECKING, declared, note_where
from ._kernel import Kernel, check_shared_mem, launch_dims
from ._memops import mem_ops_record
from ._memory import Array
from ._nesting import nesting_refusal
from ._nodes import ChildGraphParams, EmptyParams, HostParams, KernelParams, NodeKind
from ._placement import check_shared, graph_node_device, load_kernel
from ._records import event_record, host_record, memcpy_record, memset_record
from ._semaphores import semaphore_record
from ._topology import Topology

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class GraphBuild(GraphAlloc):
    """Adding nodes (a mixin of Graph: no state of its own)."""

    __slots__ = ()

    if CHECKING:  # (while $GPUGRAPH_CHECK_HAZARDS=1: a walk of the stack per node, for hazards' messages)
        def _adopt(self, handle: object, record: object, positions: list[int], alloc: object = None) -> Node:
            """Every node added passes here (the add_* methods and the compiled lane of add_kernel): noted with the
            user's line that added it."""
            node = super()._adopt(handle, record, positions, alloc)
            note_where(node)
            return node

    def add_kernel(self, kernel: Kernel, grid: Any, block: Any, *args: Any, shared_mem: int = 0,
                   after: Any = (), device: Device | None = None) -> Node:
        """Add a kernel launch node. See ``Stream.launch`` for the arguments.

        ``device``: the device the kernel runs on, any of the graph's backend (None: the graph's); Arrays of
        other devices than that one need peer access, as for a launch.

        See also: cudaGraphAddKernelNode.
        """
        fast = self._fast  # (a typical node, which the compiled lane may add whole)
        if (fast is not None and device is None and type(kernel) is Kernel and type(shared_mem) is int
                and not shared_mem):
            node = fast.add_kernel(self, kernel, grid, block, args, after)
            if node is not None:
                return node
        if type(kernel) is not Kernel:
            raise TypeError(f"add_kernel(kernel): expected a Kernel, got {type(kernel).__name__}")
        device = graph_node_device(self.device, device, "add_kernel")
        if device is not self.device and self._in_body():
            raise GraphError(f"add_kernel(device={device}): {self!r} is the body of a conditional node, whose nodes "
                             f"all run on its graph's device ({self.device})")
        grid, block = launch_dims(grid, block)
        converted = kernel.convert_args(args, device, typed=True, bind=False)
        converted = self._condition_values(converted, "add_kernel", kernel)
        params = KernelParams(kernel, grid, block, check_shared_mem(shared_mem), converted, device.index)
        self._refuse_body_params(params, "add_kernel")
        load_kernel(device, kernel)
        check_shared(device, kernel, params.shared_mem)
        node = self._add(params, after, "add_kernel")
        kernel.bind_params(converted)  # (once the node is made: a refused add_kernel changes no Param)
        return node

    def add_memcpy(self, dst: Any, src: Any, nbytes: int | None = None, after: Any = (), *, shape: Any = None,
                   dst_origin: Any = None, src_origin: Any = None) -> Node:
        """Add a copy node (any direction; Arrays or C-contiguous NumPy arrays). An ordinary NumPy array's pages are
        page-locked while a graph or executable graph refers to the node, so that the copy reads or writes the array at
        its turn (memory page-locked already, such as ``Device.pinned``'s, is used as it is).

        A 2-D or 3-D copy: ``shape`` (elements: ``w``, ``(h, w)`` or ``(d, h, w)``) of the arrays seen as (slices,
        rows, row), each of 1 to 3 dimensions and one dtype, from ``src_origin`` to ``dst_origin`` (default: 0s). An
        array whose rows are padded (pitched memory) is one whose last axis is the pitch.

        Raises:
            TypeError: If the dtypes differ and ``nbytes`` is not given.
            ValueError: If the copy moves 0 bytes, a box passes the end of an array, or the driver refuses to page-lock
                a NumPy operand (or it writes memory registered read-only).

        See also: cudaGraphAddMemcpyNode1D, cudaGraphAddMemcpyNode (a 3-D copy).
        """
        record = memcpy_record(self.device, dst, src, nbytes, "add_memcpy", shape=shape, dst_origin=dst_origin,
                               src_origin=src_origin)
        self._check_freed_memory_use((record.dst, record.src), self._deps(after, "add_memcpy"), "add_memcpy")
        return self._add(record, after, "add_memcpy")

    def add_memset(self, dst: Array, value: Any, count: int | None = None, after: Any = (), *, shape: Any = None,
                   origin: Any = None) -> Node:
        """Add a node setting ``count`` elements (default: all) of ``dst`` to ``value``; or a 2-D memset of the box
        ``shape`` (``(h, w)`` elements) at ``origin`` of ``dst``, a 1- or 2-D Array (its last axis a row).

        See also: cudaGraphAddMemsetNode.
        """
        record = memset_record(self.device, dst, value, count, "add_memset", shape=shape, origin=origin)
        self._check_freed_memory_use((record.dst,), self._deps(after, "add_memset"), "add_memset")
        return self._add(record, after, "add_memset")

    def add_host(self, fn: Callable[..., Any], *args: Any, after: Any = (), reads: object = None,
                 writes: object = None) -> Node:
        """Add a node calling ``fn(*args)`` on the host; the graph keeps ``fn`` and ``args`` alive.

        ``reads``, ``writes``: the memory the call reads and writes (an Array or NumPy array, or a list of them), for
        ``hazards``: declared, the node touches only those; undeclared, it reads and writes every Array and NumPy array
        among ``args``.

        See also: cudaGraphAddHostNode.
        """
        record = host_record(fn, args, "add_host")
        if reads is not None or writes is not None:
            record = HostParams(fn, record.args, declared(() if reads is None else reads, "add_host(reads)"),
                                declared(() if writes is None else writes, "add_host(writes)"))
        self._refuse_in_body("add_host", "host")
        return self._add(record, after, "add_host")

    def add_empty(self, after: Any = ()) -> Node:
        """Add a node that does nothing: a join point. See also: cudaGraphAddEmptyNode."""
        return self._add(EmptyParams(), after, "add_empty")

    def add_child(self, graph: Self, after: Any = ()) -> Node:
        """Add a node running a copy of ``graph`` (taken now).

        Raises:
            GraphError: If ``graph`` is this graph, on another device, holds allocation or free nodes, or
                would make graphs nest more than ``MAX_NESTING`` (64) levels deep.

        See also: cudaGraphAddChildGraphNode.
        """
        self._check_child(graph, "add_child")
        with self._lock:  # (the errors of after= first)
            self._locate(self._deps(after, "add_child"), "add_child")
        refusal = nesting_refusal(self, graph)
        if refusal is not None:
            raise GraphError(f"add_child: {refusal}")
        node = self._add(ChildGraphParams(_graph_reads.handle(graph)), after, "add_child")
        # The copy the node embeds is described now, from the graph copied: it is never read node by node.
        with self._lock:
            i = self._index(node)
            self._topology.children[i] = Topology.copy_of(_graph_reads.topology(graph), self._backend,
                                                          self._topology.records[i].graph)
        return node

    def add_event_record(self, event: Event, after: Any = ()) -> Node:
        """Add a node recording ``event``. See also: cudaGraphAddEventRecordNode."""
        record = event_record(self.device, NodeKind.EVENT_RECORD, event, "add_event_record")
        self._refuse_in_body("add_event_record", "event record")
        return self._add(record, after, "add_event_record")

    def add_event_wait(self, event: Event, after: Any = ()) -> Node:
        """Add a node waiting for ``event``'s last record. See also: cudaGraphAddEventWaitNode."""
        record = event_record(self.device, NodeKind.EVENT_WAIT, event, "add_event_wait")
        self._refuse_in_body("add_event_wait", "event wait")
        return self._add(record, after, "add_event_wait")

    def add_semaphore_signal(self, semaphores: Any, values: Any = None, after: Any = ()) -> Node:
        """Add a node signaling ``semaphores`` (an ExternalSemaphore of this graph's device, or a list): timeline
        ones to ``values`` (one int for all, or one per semaphore), binary ones (no value).

        See also: hipGraphAddExternalSemaphoresSignalNode, cudaGraphAddExternalSemaphoresSignalNode.
        """
        return self._add_semaphores(NodeKind.SEMAPHORE_SIGNAL, semaphores, values, after, "add_semaphore_signal")

    def add_semaphore_wait(self, semaphores: Any, values: Any = None, after: Any = ()) -> Node:
        """Add a node that waits until ``semaphores`` are signaled (timeline ones to at least ``values``, binary ones
        once each) before the nodes after it run.

        See also: hipGraphAddExternalSemaphoresWaitNode, cudaGraphAddExternalSemaphoresWaitNode.
        """
        return self._add_semaphores(NodeKind.SEMAPHORE_WAIT, semaphores, values, after, "add_semaphore_wait")

    def _add_semaphores(self, kind: NodeKind, semaphores: Any, values: Any, after: Any, what: str) -> Node:
        record = semaphore_record(self.device, kind, semaphores, values, what)
        self._refuse_in_body(what, kind.value.replace("_", " "))
        return self._add(record, after, what)

    def add_mem_ops(self, ops: Any, after: Any = ()) -> Node:
        """Add a node running memory operations in order: ``gg.WaitValue`` (wait for a value in device memory) and
        ``gg.WriteValue`` (write one), one or a list, on Arrays of 4- or 8-byte integers of this graph's device.

        See also: hipGraphAddBatchMemOpNode, cuGraphAddBatchMemOpNode.
        """
        record = mem_ops_record(self.device, ops, "add_mem_ops")
        self._refuse_in_body("add_mem_ops", "batch memory-op")
        return self._add(record, after, "add_mem_ops")
