"""The one boundary between gpugraph's front end and a backend: opaque-handle operations.

Handles are whatever the backend chooses; the front end only stores them, passes them back and uses
node handles as dictionary keys (so they must be hashable and compare by identity of the native object).
Memory operands are front-end ``Array`` objects or C-contiguous NumPy arrays; node parameters are the
records of ``gpugraph._nodes``. Every call maps to one HIP/CUDA runtime or driver call where one exists.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from ._host_registry import HostRegistry
from ._hot import HotCalls

Handle = Any


class TimelineRecord(NamedTuple):
    """One piece of work that ran while a timeline recorded (``Backend.timeline_stop`` gives them)."""

    kind: str  # what ran, as a NodeKind's value: "kernel", "memcpy", "memset", "host"
    name: str  # its name: the kernel's, the host function's, or the copy's or memset's bytes ("4096 B")
    start: int  # nanoseconds since the recording began, on one clock for all its records
    end: int
    lane: str  # what ran it, so that work in different lanes may overlap: "stream 3", "worker 2"
    launch: int | None  # which graph launch ran it, one number per launch of the recording; None: a stream operation
    graph_exec: Handle  # the executable graph whose launch ran it (the backend's handle), None where not known
    node: Handle  # the graph node that ran, None for a stream operation or where the backend cannot tell: a node
    # handle of the graph ``graph_exec`` was instantiated from, or of a child graph or conditional body in it
    number: int | None = None  # that node's number in its graph (a Node's, which no later node takes), where the
    # backend may give a node added since the handle of one removed: the Node of ``node`` must have it to be named


class Backend(Protocol):
    """What a backend (cpu, cuda, hip) provides."""

    name: str
    # The host memory page-locked for copies and Device.register_host (cudaHostRegister), with its uses counted.
    host_registry: HostRegistry
    # Whether the backend's streams and memory are CUDA's, so that the CUDA stream protocol and the CUDA
    # Array Interface apply to them (gpugraph._interop asks; a HIP backend would speak its own protocols).
    speaks_cuda: bool
    # The DLPack device type (DLDeviceType) of the backend's memory: kDLCPU 1, kDLCUDA 2, kDLROCM 10.
    dlpack_device_type: int
    # The calls the compiled core makes itself on its hot paths (gpugraph.backends._hot), or None: the core then
    # calls the methods below.
    hot: HotCalls | None

    # Devices
    def device_count(self) -> int: ...
    def device_name(self, index: int) -> str: ...
    def device_synchronize(self, index: int) -> None: ...
    def device_properties(self, index: int) -> dict[str, Any]:
        """The value of each of ``gpugraph._properties.PROPERTIES`` for device ``index``."""
    def device_schedule(self, index: int) -> str:
        """How host threads wait for device ``index`` (a name of ``gpugraph._properties.SCHEDULES``)."""
    def set_device_schedule(self, index: int, schedule: str) -> None: ...
    def device_can_access_peer(self, index: int, peer: int) -> bool:
        """Whether the hardware lets kernels on device ``index`` access memory of device ``peer``."""
    def peer_access(self, index: int, peer: int) -> bool:
        """Whether gpugraph has enabled that access (``enable_peer_access``)."""
    def enable_peer_access(self, index: int, peer: int) -> None:
        """Let kernels on device ``index`` access memory of device ``peer``: its allocations, and those of its memory
        pool (one direction; done once)."""

    # Memory
    def mem_alloc(self, index: int, nbytes: int) -> tuple[int, Handle]: ...
    def mem_free(self, alloc: Handle) -> None: ...
    def pinned_empty(self, index: int, nbytes: int) -> np.ndarray: ...
    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src`` to ``dst`` (Arrays or host arrays), done when it returns: work queued after it
        on any stream sees the data."""
    def data_address(self, array: Any) -> int: ...
    def export_memory(self, array: Any) -> tuple[int, Any]:
        """``array``'s memory for another library (DLPack): its address and an object that keeps that memory
        valid while held (None where the Array keeps it); the export holds both as long as the view lives."""
    def mem_import(self, index: int, ptr: int, nbytes: int) -> Handle:
        """An allocation record (origin "device") for ``nbytes`` at ``ptr`` that another library allocated and
        keeps alive (gpugraph never frees it); ValueError saying what the memory is when it is not memory of
        device ``index``."""
    def mem_host_mapped(self, index: int, array: np.ndarray, keep: Any) -> Handle:
        """An allocation record (origin "device", never freed, keeping ``array`` and ``keep`` alive: the memory's
        page-locking) of the page-locked memory of the C-contiguous ``array`` as device ``index``'s kernels reach it
        (hipHostGetDevicePointer)."""
    def graph_memory(self, index: int) -> dict[str, int]: ...
    def graph_memory_trim(self, index: int) -> None: ...
    def graph_memory_reset_high(self, index: int) -> None:
        """Start the pool's high watermarks again from its figures now."""

    # External semaphores
    def semaphore_import(self, index: int, handle: Any, timeline: bool) -> Handle:
        """Device ``index``'s handle on another API's semaphore ``handle`` (what the backend imports: CUDA a file
        descriptor, which it owns once imported; the CPU backend an EmulatedSemaphore); TypeError or ValueError
        saying why not."""
    def semaphore_destroy(self, semaphore: Handle) -> None: ...

    # Kernels
    def kernel_load(self, index: int, kernel: Any) -> Handle:
        """``kernel``'s function on device ``index``, made on first use from what the Kernel comes as: its source
        (compiled), a Module's code (``kernel.module``: loaded once per device, its kernels sharing it) or another
        library's function (``kernel.handle``, of the device ``kernel.device`` only: ValueError on any other). A
        backend that cannot run the code refuses it here, saying what to do, unless ``kernel.cpu`` stands in for it
        (the CPU backend runs no compiled GPU code: GpuGraphError)."""
    def kernel_variable(self, index: int, kernel: Any, name: str) -> Handle | None:
        """The allocation record (origin "device", never freed) of the variable of linkage name ``name`` in the
        module ``kernel`` runs from on device ``index`` (cuModuleGetGlobal), loading it on first use; None where the
        module has none."""
    def kernel_static_shared(self, index: int, kernel: Any) -> int:
        """The bytes of static shared memory (``__shared__`` variables) of ``kernel`` on device ``index``,
        loading it on first use."""
        ...

    # Kernel node attributes (gpugraph._attributes: the front end checks every value first)
    def kernel_attribute_limits(self, index: int) -> Any:
        """What device ``index`` allows of kernel node attributes (an ``AttributeLimits``)."""
    def kernel_cooperative_blocks(self, index: int, kernel: Any, threads: int, shared_mem: int) -> int:
        """The most blocks of ``threads`` threads (and ``shared_mem`` bytes of dynamic shared memory) of ``kernel``
        resident on device ``index`` at once: a cooperative launch's limit."""
    def node_attributes(self, graph: Handle, node: Handle) -> Any:
        """Kernel node ``node``'s KernelAttributes (those it was captured with, too)."""
    def node_set_attributes(self, graph: Handle, node: Handle, attributes: Any) -> None:
        """Give kernel node ``node`` the KernelAttributes ``attributes``: all, or (a refusal) none."""
    def node_copy_attributes(self, graph: Handle, node: Handle, src_graph: Handle, src: Handle) -> None:
        """Give kernel node ``node`` the attributes of kernel node ``src`` (of ``src_graph``)."""
    # (An executable graph keeps its kernel nodes' attributes: ``exec_set_node`` raises AttributeRefusal for a launch
    # shape they do not allow; ``exec_update`` refuses "attributes changed" for a change of cooperative, or of
    # priority where the graph was instantiated with use_node_priority, and takes the other attributes.)

    # Streams and events
    def stream_create(self, index: int, non_blocking: bool, priority: int) -> Handle: ...
    def stream_default(self, index: int) -> Handle: ...
    def stream_destroy(self, stream: Handle) -> None: ...
    def stream_address(self, stream: Handle) -> int: ...
    def stream_external(self, index: int, address: int) -> tuple[Handle, int, bool, int]:
        """A handle on another library's native stream at ``address`` (never destroyed by gpugraph): (handle,
        index of the device it belongs to, non-blocking?, priority); ValueError saying what the driver answered
        when ``address`` is no stream handle it knows. Asked only of backends whose streams are CUDA's
        (``speaks_cuda``)."""
    def stream_synchronize(self, stream: Handle) -> None: ...
    def stream_query(self, stream: Handle) -> bool: ...
    # ``capture`` below: the backend's record of the capture the stream takes part in (see Capture), as the
    # front end's Capture passes it, else None. The streams themselves keep no capture. If that capture has
    # ended meanwhile (another thread ended it), the work is done as uncaptured work: a captured call and the
    # capture's end exclude each other, so no node is added to an ended capture's graph.
    def stream_launch(self, stream: Handle, function: Handle, grid: tuple, block: tuple,
                      shared_mem: int, args: tuple, capture: Handle | None) -> None: ...
    def stream_memcpy(self, stream: Handle, dst: Any, src: Any, nbytes: int, capture: Handle | None,
                      box: Any = None, pins: tuple = ()) -> None:
        """Copy ``nbytes`` from the operands' starts, or the ``_nodes.Box`` ``box`` of them (a 2-D or 3-D copy); a
        captured copy's record holds ``pins`` (its host operands page-locked: ``_memory.host_pins``)."""
    def stream_memset(self, stream: Handle, dst: Any, value: Any, pattern: int, element_size: int,
                      count: int, capture: Handle | None, plane: tuple[int, int, int] | None = None) -> None:
        """Set ``count`` elements from ``dst``'s start; with ``plane`` (pitch, rows, offset), ``count`` elements in each
        of ``rows`` rows ``pitch`` bytes apart from ``offset`` bytes into ``dst`` (a 2-D memset)."""
    def stream_host(self, stream: Handle, fn: Any, args: tuple, capture: Handle | None) -> None: ...
    def stream_mem_ops(self, stream: Handle, params: Any, capture: Handle | None) -> None:
        """Run the memory operations of ``params`` (a MemOpsParams of one operation) in stream order."""
    def stream_semaphores(self, stream: Handle, params: Any, capture: Handle | None) -> None:
        """Signal or wait on external semaphores as ``params`` (a SemaphoreSignalParams or SemaphoreWaitParams) says."""
    # (A captured allocation's record has origin "graph"; ``stream_free``, ``event_record`` and ``exec_launch``
    # return whether the call was captured, for the front end's follow-up.)
    def stream_alloc(self, stream: Handle, nbytes: int, capture: Handle | None) -> tuple[int, Handle]: ...
    def stream_free(self, stream: Handle, alloc: Handle, capture: Handle | None) -> bool: ...
    # ``capture``: the capture ``event`` was last recorded in, while it runs (the front end's record:
    # Event._capture), else None. The backend makes the wait, and then ``stream`` takes part in that capture
    # (a fork), or a stream already in it waits for the event's nodes (a join; on CUDA the driver joins the
    # frontiers). The backend does not judge which capture again. If that capture has ended meanwhile (another
    # thread ended it), it returns False and does nothing: the CUDA driver refuses such a wait.
    def stream_wait_event(self, stream: Handle, event: Handle, capture: Handle | None) -> bool: ...

    # Capture: the backend records; the front end (gpugraph._capture) owns which streams and events take part
    # and applies the rules. ``capture_create`` makes the backend's record of a capture (nothing begins yet),
    # so the front end holds it before anything can interrupt the begin. An exception (KeyboardInterrupt) may
    # stop a begin or an end at any point: ``capture_active`` then still says whether the backend records
    # into the capture, and the front end aborts or completes it; an abort of an inactive capture does nothing.
    def capture_create(self, stream: Handle, mode: str, graph: Handle | None) -> Handle: ...
    def thread_capture_mode(self, mode: str) -> None:
        """Set the calling thread's capture interaction mode in the driver (cudaThreadExchangeStreamCaptureMode)."""
    def capture_id(self, capture: Handle) -> int:
        """The capture's id, unique among the process's captures (cudaStreamGetCaptureInfo's), once begun."""
    def capture_begin(self, capture: Handle, deps: Sequence[Handle]) -> Handle:
        """Begin recording the stream's work into the capture's graph (a new one, or ``graph`` after ``deps``);
        returns the graph."""
    def capture_end(self, capture: Handle) -> Handle: ...
    def capture_abort(self, capture: Handle) -> None: ...
    def capture_active(self, capture: Handle) -> bool: ...
    def capture_dependencies(self, capture: Handle, stream: Handle) -> list[Handle]: ...
    def capture_dependency_kinds(self, capture: Handle, stream: Handle) -> list[str]:
        """The kind (of DEPENDENCY_KINDS) of the edge the next captured work gets from each dependency, in order."""
    def capture_set_dependencies(self, capture: Handle, stream: Handle, deps: Sequence[Handle],
                                 kinds: Sequence[str] | None = None) -> None:
        """Make ``deps`` the stream's frontier, the next captured work's edges from them of ``kinds`` (one per
        dependency; None: all full)."""

    def event_create(self, index: int, timing: bool) -> Handle: ...
    def event_destroy(self, event: Handle) -> None: ...
    def event_record(self, event: Handle, stream: Handle, capture: Handle | None) -> bool: ...
    def event_synchronize(self, event: Handle) -> None: ...
    def event_query(self, event: Handle) -> bool: ...
    def event_elapsed_ms(self, start: Handle, end: Handle) -> float: ...

    # Communicators (gpugraph._collectives checks every argument before these)
    def comm_init_all(self, indices: list[int], timeout: float | None) -> list[Handle]:
        """One communicator per device ``indices[rank]`` (ncclCommInitAll); ``timeout``: see communicators."""
    def comm_unique_id(self) -> bytes:
        """A new id for a communicator group of several processes (ncclGetUniqueId)."""
    def comm_init_rank(self, index: int, rank: int, size: int, unique_id: bytes, timeout: float | None) -> Handle:
        """Rank ``rank`` of ``size`` of the group ``unique_id`` names, on device ``index`` (ncclCommInitRank):
        returns once every rank has joined."""
    def comm_enqueue(self, comm: Handle, kind: str, send: Any, recv: Any, count: int, dtype: Any, op: str | None,
                     root: int, stream: Handle, capture: Handle | None) -> None:
        """Enqueue (or capture) rank ``comm``'s part of collective ``kind`` (all_reduce, broadcast, reduce,
        all_gather, reduce_scatter; send and recv with ``root`` the peer)."""
    def comm_abort(self, comm: Handle) -> None: ...
    def comm_aborted(self, comm: Handle) -> bool: ...
    def comm_destroy(self, comm: Handle) -> None: ...
    def comm_group_start(self) -> None: ...
    def comm_group_end(self) -> None: ...

    # User objects: ``destroy`` (which never raises) runs once every reference is released; a graph's references
    # are held by its clones, the copies child-graph nodes embed and executable graphs made from it too, until
    # their work is done.
    def user_object_create(self, destroy: Callable[[], None], count: int) -> Handle: ...
    def user_object_retain(self, obj: Handle, count: int) -> None: ...
    def user_object_release(self, obj: Handle, count: int, collected: bool) -> None:
        """Release ``count`` references; ``collected``: for a collected UserObject (a release that may wait)."""
    def graph_retain_user_object(self, graph: Handle, obj: Handle, count: int, move: bool) -> None: ...
    def graph_release_user_object(self, graph: Handle, obj: Handle, count: int) -> None: ...

    # Graphs
    def graph_create(self, index: int) -> Handle: ...
    def graph_destroy(self, graph: Handle) -> None: ...
    def graph_add_node(self, graph: Handle, params: Any, deps: Sequence[Handle]) -> Handle: ...
    def graph_condition(self, graph: Handle, default: int, reset: bool) -> tuple[Handle, int]:
        """A condition for conditional nodes of ``graph`` or of its bodies (cudaGraphConditionalHandleCreate):
        (its handle, the unsigned 64-bit value kernels are passed for it). A ConditionalParams given to
        ``graph_add_node`` has placeholder bodies; ``node_params`` then names the node's own body graphs."""
    def graph_add_alloc(self, graph: Handle, nbytes: int, deps: Sequence[Handle], index: int,
                        access: tuple[int, ...]) -> tuple[Handle, int, Handle]:
        """An allocation node of memory of device ``index``; ``access``: the other devices that may use it
        (checked by the front end)."""
    def graph_add_free(self, graph: Handle, alloc: Handle, deps: Sequence[Handle]) -> Handle: ...
    def node_allocation(self, graph: Handle, node: Handle) -> Handle | None:
        """The allocation record that an allocation or free node gpugraph made allocates or frees, else None
        (graph allocations are told apart by record: a later allocation may reuse a freed one's address)."""
    def graph_destroy_node(self, graph: Handle, node: Handle) -> None: ...
    def graph_set_node(self, graph: Handle, node: Handle, params: Any) -> None:
        """Give ``node`` of ``graph`` the parameter record ``params``, of its kind (kernel, memcpy, memset, host, event
        record or wait, child graph: the front end has checked them). A child-graph node embeds a new copy of the
        graph ``params`` names (``node_params`` names it). Executable graphs made from ``graph`` keep what they had."""
    def graph_add_dependency(self, graph: Handle, src: Handle, dst: Handle, kind: str) -> None:
        """An edge of ``kind`` (one of DEPENDENCY_KINDS; the front end checked the nodes suit it)."""
    def graph_dependency_kind(self, graph: Handle, src: Handle, dst: Handle) -> str:
        """The kind of the edge from ``src`` to ``dst`` (which the front end knows exists)."""
    def graph_remove_dependency(self, graph: Handle, src: Handle, dst: Handle) -> None: ...
    def graph_nodes(self, graph: Handle) -> list[Handle]: ...
    def graph_edges(self, graph: Handle) -> list[tuple[Handle, Handle]]: ...
    def graph_dependencies(self, graph: Handle, nodes: list[Handle]) -> tuple[list[Any], bool] | None:
        """The compiled lane of ``Topology._dependencies(graph_edges(graph))`` for ``nodes`` (the same result), or
        None to leave it to the front end."""
    def graph_has_shape(self, graph: Handle, count: int, shape: tuple[Any, ...]) -> bool | None:
        """The compiled lane of ``Topology.has_shape`` for a graph of ``count`` nodes whose edges are unread
        (whether each node's dependencies, as positions in ``graph_nodes``' order, are those ``shape`` gives), or
        None to leave it to the front end."""
    def node_params(self, graph: Handle, node: Handle) -> Any: ...
    def graph_clone(self, graph: Handle) -> Handle: ...
    def graph_id(self, graph: Handle) -> int:
        """The graph's id, unique in the process (cudaGraphGetId)."""
    def node_ids(self, graph: Handle, node: Handle) -> tuple[int, int]:
        """The node's id in its graph and the id tools name it by (cudaGraphNodeGetLocalId, ...GetToolsId)."""
    def exec_id(self, exe: Handle) -> int:
        """The executable graph's id, unique in the process (cudaGraphExecGetId)."""
    def graph_debug_dot(self, graph: Handle, path: str, flags: tuple[str, ...]) -> bool:
        """Write the driver's DOT description of ``graph`` to ``path``, with ``flags`` (``_dot.DOT_FLAGS`` names);
        False, writing nothing, where the backend has no driver of its own (the front end writes its own)."""
    def graph_instantiate(self, graph: Handle, flags: frozenset[str]) -> Handle:
        """An executable graph of ``graph``, made with ``flags`` (``_instantiate.INSTANTIATE_FLAGS`` names). A refusal
        raises GraphInstantiateError naming this backend's node handle (or None)."""
    def exec_launch(self, exec_: Handle, stream: Handle, capture: Handle | None) -> bool: ...
    def graph_builder(self, graph: Handle, device: Any) -> Any:
        """The compiled lane of adding kernel nodes to ``graph`` (``add_kernel(graph, kernel, grid, block, args,
        after)``: the new Node, or None to leave it to ``graph_add_node``), or None. ``device``: the front end's
        Device of the graph."""
    def exec_device_handle(self, exec_: Handle) -> int:
        """The number a kernel takes for the executable graph (a cudaGraphExec_t) to launch it with cudaGraphLaunch
        (instantiated with device_launch)."""
    def exec_upload(self, exec_: Handle, stream: Handle) -> None: ...
    def exec_upload_for_kernels(self, exec_: Handle) -> None:
        """Make what a kernel launching ``exec_`` (instantiated with device_launch) runs its parameters now, and
        wait for it (CUDA: upload it again; the front end calls this after each change)."""
    def exec_set_node(self, exec_: Handle, node: Handle, params: Any) -> None: ...
    def exec_param_patcher(self, exec_: Handle, node: Handle, params: Any) -> Callable[[], None]: ...
    def exec_set_enabled(self, exec_: Handle, node: Handle, enabled: bool) -> None: ...
    def exec_update(self, exec_: Handle, graph: Handle, originals: list[Handle]) -> tuple[str, Handle] | None:
        """Take the parameters of ``graph``, whose nodes pair with ``originals`` (the executable graph's) in
        creation order: None when done, else (the rule broken, the offending node of ``graph`` or None) with
        nothing changed. The front end has compared the topology and refused allocation and free nodes; the
        backend checks the parameters, as cuGraphExecUpdate does (gpugraph._update's rules per node)."""
    def exec_destroy(self, exec_: Handle) -> None: ...

    # Timelines (gpugraph._timeline: one records at a time per backend, the front end sees to it)
    def timeline_start(self, index: int) -> Handle:
        """Begin recording when the kernels, copies, memsets and host functions of graph nodes and stream
        operations launched on device ``index`` from now on start and end; the recording's handle. ImportError
        naming the package to install where the backend needs one that is missing (CUDA: cupti-python)."""
    def timeline_stop(self, timeline: Handle, executables: Sequence[tuple[Handle, Callable[[], Any]]]
                      ) -> list[TimelineRecord]:
        """End the recording ``timeline`` once the device's work launched so far has finished (its streams keep
        their errors for the next synchronize); what ran, in no particular order. ``executables``: the device's open
        executable graphs, which the records may name, each with a call giving what names its nodes
        (``_exec_state.timeline_nodes``: the graph it runs, the handles and numbers of the graph it was instantiated
        from and that graph's next number; None once closed), which CUDA's records number."""
