"""GraphExec: an instantiated graph, launched with one call, updated in place.

Its fields, and what it knows of the graph it runs (the layout, the nodes setters may name), are its base's,
``gpugraph._exec_state.ExecState``; this module adds launching (into a capture too), uploading, updating, the
setters, its lifetime and the argument a kernel takes for it.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from . import _capture_rules, _graph_reads, _params
from ._attributes import AttributeRefusal
from ._capture import Capture
from ._device_launch import ExecArgument, KernelLaunchable
from ._errors import GraphError, GraphInstantiateError, GraphUpdateError
from ._event import Event, note_recorded
from ._exec_state import ExecState, refuse_child_params, turn_lock
from ._graph_node import Node, handle_of, number_of
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._instantiate import name_the_node
from ._kernel import Kernel
from ._memops import mem_ops_record
from ._nesting import nesting_refusal
from ._nodes import BODY_KINDS, SEMAPHORE_KINDS, ChildGraphParams, KernelParams, NodeKind, why_gone
from ._params import Param, ParamUses
from ._placement import sibling
from ._records import event_record, host_record, kernel_record, memcpy_record, memset_record
from ._scalars import describe
from ._semaphores import semaphore_record
from ._stream import Stream, guard
from ._stream_state import StreamState
from ._update import GraphLayout, check_update, node_refusal

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

    from ._graph import Graph


_KERNEL = (NodeKind.KERNEL,)


def _serialized(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run a GraphExec method under the executable graph's lock (see GraphExec); refused in host functions,
    which must not call CUDA (gpugraph._host_threads)."""
    api = f"GraphExec.{method.__name__.lstrip('_')}"

    @functools.wraps(method)
    def locked(self: GraphExec, *args: Any, **kwargs: Any) -> Any:
        if HOST_THREADS:
            refuse_in_host_function(api)
        with self._lock:
            result = method(self, *args, **kwargs)  # (then returned: see cuda._nodes.add_node)
        return result
    return locked


def check_stream(stream: object, device: object, what: str, arg: str = "stream") -> Stream:
    """``stream``, refused (as the argument ``arg`` of the call ``what``) unless it is a Stream of ``device``, the
    device of the graph it is to run or upload."""
    if type(stream) is not Stream:
        # Another library's stream: wrapped once, it keeps one capture state (see Stream.from_external).
        hint = (" (wrap another library's stream once with gg.Stream.from_external(stream))"
                if hasattr(stream, "__cuda_stream__") else "")
        raise TypeError(f"{what}({arg}): expected a Stream, got {type(stream).__name__}{hint}")
    if stream.device is not device:
        raise ValueError(f"{what}({arg}): the stream is on {stream.device}, the graph on {device}")
    return stream


class GraphExec(ExecState, KernelLaunchable):
    """An executable graph, made by ``Graph.instantiate``; launch it on any stream of its device.

    Usable as a context manager; ``close`` (or garbage collection) releases it. Nodes passed to the
    setters are nodes of the graph it was instantiated from (or of the graph of its latest ``update``).

    Threads may share it: its calls (launch, update, the setters, set_enabled, upload, close) take turns,
    so a launch runs the whole graph before or after an update, never a mix. CUDA leaves that to the caller
    (an executable graph is not internally synchronized: a cuGraphExecUpdate racing a cuGraphLaunch made one
    launch run host nodes of both graphs on the H200). Setting a ``Param`` from one thread while another
    launches is not covered: the launch may run with the old value.

    See also: cudaGraphExec_t.
    """

    __slots__ = ()  # (the fields are ExecState's)

    def __init__(self, graph: Graph, flags: frozenset[str], graph_type: Any) -> None:
        """(Made by ``Graph.instantiate``, which passes its class, graphs updated from are of it, and the flags
        named in ``gpugraph.INSTANTIATE_FLAGS`` that it was given.)"""
        self.graph = graph
        self._graph_type = graph_type
        self.device = graph.device
        self._backend = backend = graph._backend
        self._flags = flags
        try:
            self._handle = backend.graph_instantiate(graph._handle, flags)
        except GraphInstantiateError as exc:  # (the backend names its own node: named again as the graph's Node)
            raise name_the_node(graph, exc) from None
        self._launch = backend.exec_launch
        # The kernel arguments naming it, by id (ExecArguments compare as numbers: no WeakSet can hold them apart).
        self._arguments: dict[int, weakref.ref] = {}
        self._lock = turn_lock()  # the calls of several threads take turns (see the class docstring)
        self._finalizer = weakref.finalize(self, backend.exec_destroy, self._handle)
        self._finalizer.atexit = False  # the driver may be gone at interpreter exit
        # The backend's hot calls, which the compiled core launches it through (gpugraph.backends._hot), if any.
        self._hot = hot = backend.hot
        self._hot_address = 0 if hot is None else hot.graph_address(self._handle)
        self._hot_set, self._hot_context = (0, 0) if hot is None else hot.node_setter(self._handle)
        self._params = ParamUses()  # its nodes taking Params, and their patches
        self._changed = False  # a setter or set_enabled changed it since instantiate or update
        # Instantiated with device_launch, changed, and not yet uploaded again for kernels launching it (an upload
        # failed): each launch, change and kernel argument tries again first (_upload_for_kernels).
        self._stale_for_kernels = False
        self._setup_source(graph)
        if _params.in_use:
            self._params.adopt(self._find_params(graph))
            if self._params and "device_launch" in flags:
                self.close()
                raise GraphInstantiateError("instantiate error", detail=f"device_launch: {_DEVICE_LAUNCH_PARAMS}")

    @property
    def id(self) -> int:
        """The executable graph's id, unique in the process (CUDA 13.1; on an older driver BackendError).

        Raises:
            GraphError: If it is closed.

        See also: cudaGraphExecGetId.
        """
        handle = self._handle
        if handle is None:
            raise GraphError("GraphExec.id: this GraphExec is closed")
        return self._backend.exec_id(handle)

    @property
    def flags(self) -> frozenset[str]:
        """The flags it was instantiated with (names of ``gpugraph.INSTANTIATE_FLAGS``). See also:
        cudaGraphExecGetFlags."""
        return self._flags

    # Launching

    def _stream_handle(self, stream: object, what: str) -> Any:
        if self._handle is None:
            raise GraphError(f"{what}: this GraphExec is closed")
        return check_stream(stream, self.device, what)._handle

    def _launch_checked(self, given: StreamState) -> None:
        """Every launch but the common case, which ``ExecState.launch`` makes itself when compiled: checked, under
        the lock, into a capture too (as a child-graph node), after patching nodes whose Params changed."""
        with self._lock:
            handle = self._handle
            if handle is None or type(given) is not Stream or given.device is not self.device:
                self._stream_handle(given, "launch")
            stream = cast(Stream, given)  # (a Stream of its device: anything else was refused)
            capture = stream.active_capture
            if capture is not None or stream.legacy or _capture_rules.function_captures:
                self._guard_capture(stream)
            if self._params.pending:
                self._params.patch(self._prepare_patch)
            if self._stale_for_kernels:  # (it may launch itself again from a kernel: cudaGetCurrentGraphExec)
                self._upload_for_kernels("launch", "nothing was launched")
            # (False: launched uncaptured, also when the capture ended meanwhile on another thread.)
            if self._launch(handle, stream._handle, None if capture is None else capture._handle):
                self._describe_embedded(capture, stream)
                return
            events = self._recorded_events
            if events is None:
                events = self._recorded_events = self._events_recorded()
            for event in events:  # (mostly none)
                note_recorded(event, None)  # (recorded by a launch outside any capture)

    def _describe_embedded(self, capture: Capture, stream: Stream) -> None:
        """The launch into a capture embedded a copy of the source graph as a child-graph node, now the
        stream's capture frontier: the captured graph describes the copy from the source's Topology (as
        ``Graph.add_child`` does), not from the backend's node-by-node read-back."""
        (handle,) = self._backend.capture_dependencies(capture._handle, stream._handle)
        _graph_reads.note_embedded(capture.graph, handle, self._source)

    def _guard_capture(self, stream: Stream) -> None:
        guard(stream, "GraphExec.launch")  # (the stream's check of a call enqueued on it, as its methods make it)
        capture = stream.active_capture
        if capture is None:
            return
        if _graph_reads.topology(self.graph).memory:
            raise _capture_rules.invalidate([capture], "GraphExec.launch", "a graph with allocation or free "
                              "nodes cannot be launched into a capture (it would become a child graph)")
        if self._read_layout().bodies:  # (as instantiated or last updated)
            raise _capture_rules.invalidate([capture], "GraphExec.launch", "a graph with conditional nodes "
                              "cannot be launched into a capture (it would become a child graph, which CUDA refuses)")
        into = capture.graph  # (the graph it records into: a body of a conditional node, or not)
        if into is not None and _graph_reads.in_body(into):
            kind = _graph_reads.holds_other_than(self._source, BODY_KINDS)
            if kind is not None:
                raise _capture_rules.invalidate([capture], "GraphExec.launch", f"the capture fills the body "
                                  f"of a conditional node, which cannot hold {kind.name.lower()} nodes, and the graph "
                                  f"launched into it (as a child graph) has one")
        if _graph_reads.version(self._source) != self._source_version:
            raise _capture_rules.invalidate([capture], "GraphExec.launch", "the graph was changed after it was "
                              "instantiated, and a launch into a capture embeds the graph; instantiate it again")
        if self._disabled:
            raise _capture_rules.invalidate([capture], "GraphExec.launch", "an executable graph with a node "
                              "turned off by set_enabled (an update keeps it off) cannot be launched into a "
                              "capture (the capture embeds the graph it was made from, with every node on); "
                              "turn the node on again first, or capture the work itself")
        if self._changed or self._params:
            raise _capture_rules.invalidate([capture], "GraphExec.launch", "an executable graph changed by "
                              "setters, set_enabled or Params cannot be launched into a capture (the capture embeds "
                              "the graph it was made from); launch that graph's instantiation before the changes, or "
                              "capture the work itself")
        refusal = nesting_refusal(capture.graph, self._source)
        if refusal is not None:
            raise _capture_rules.invalidate([capture], "GraphExec.launch", refusal)

    @_serialized
    def upload(self, stream: Stream) -> None:
        """Prepare the graph's device resources ahead of its first launch. See also: cudaGraphUpload."""
        self._backend.exec_upload(self._handle, self._stream_handle(stream, "upload"))

    # Dynamic parameters

    def _prepare_patch(self, index: int, record: KernelParams) -> Callable[[], None]:
        return self._backend.exec_param_patcher(self._handle, self._handles[index], record)

    # Changing an executable graph

    @_serialized
    def update(self, graph: Graph) -> None:
        """Take the parameters of ``graph``, which must have this executable graph's topology.

        An update is all or nothing: whatever stops it (a refusal, an error, KeyboardInterrupt), the
        executable graph runs and addresses either the old graph wholly or the new one wholly. Nodes
        turned off by ``set_enabled`` stay off.

        Raises:
            GraphUpdateError: Naming the node of ``graph`` and the rule it breaks (see gpugraph._update);
                the executable graph is left as it was.
            GraphError: If it was instantiated with device_launch and uploading it again for kernels failed:
                the update stays (see ``Graph.instantiate``).

        See also: cudaGraphExecUpdate.
        """
        self._check_open("update")
        if not isinstance(graph, self._graph_type):
            raise TypeError(f"update(graph): expected a Graph, got {type(graph).__name__}")
        if graph.device is not self.device:
            raise GraphUpdateError("device changed", None, f"the graph is on {graph.device}, this executable "
                                                           f"graph on {self.device}")
        if _graph_reads.drives_another(graph, self):
            # (Its conditions would then drive two executable graphs: CUDA lets one executable graph of a graph
            # with conditional nodes live at a time, and the CPU backend keeps one value per condition.)
            raise GraphUpdateError("parameters changed", None, f"{graph!r} has conditional nodes and an executable "
                                                               f"graph of its own; close that one first (one "
                                                               f"executable graph of such a graph may live at a time)")
        found = self._find_params(graph) if _params.in_use else {}
        if found and "device_launch" in self._flags:
            handle = _graph_reads.topology(graph).handles[min(found)]
            raise GraphUpdateError("parameters changed", _graph_reads.node_of(graph, handle), _DEVICE_LAUNCH_PARAMS)
        patched_gone = sorted(self._gone.intersection(found))
        if patched_gone:  # (its Params would be patched through the node removed there)
            handle = _graph_reads.topology(graph).handles[patched_gone[0]]
            raise GraphUpdateError("parameters changed", _graph_reads.node_of(graph, handle),
                                   "the node takes Params, and the node at its place in the graph this executable "
                                   "graph was made from was removed (remove_node): Params are patched through it")
        shape = _graph_reads.shape(graph, like=self._source_shape())
        refused = self._refusal(graph, shape)
        if refused is None:
            self._changing_for_kernels()  # (an update refused changes nothing: the next upload is only redone)
            refused = self._apply(graph, shape, found)
        if refused is None:
            self._upload_for_kernels("update")
        if refused is not None:  # explain with gpugraph's rules, which name the node of the new graph
            check_update(self._read_layout(), GraphLayout(graph), True, "use_node_priority" in self._flags)
            reason, handle = refused
            raise GraphUpdateError(reason, None if handle is None else _graph_reads.node_of(graph, handle))

    def _refusal(self, graph: Graph, shape: Any) -> tuple[str, Any] | None:
        """What the front end refuses before the backend is asked: nodes pair in creation order (setters and
        Params address them so), so the topology is compared here, in the cheapest form (``shape``), as a
        driver would accept an isomorphic graph paired otherwise; and allocation and free nodes, whose
        addresses cannot move, refuse any update. The backend checks the rest (parameters), as
        cuGraphExecUpdate does."""
        source = self._source_shape()
        if shape is not source and shape != source:
            return "topology changed", None
        # (The source as the executable graph knows it: its layout, once taken, else the graph, unchanged since.)
        if _graph_reads.topology(graph).memory or (self._layout.memory if self._layout is not None
                                                   else _graph_reads.topology(self._source).memory):
            return "unsupported node kind", None
        return None

    def _apply(self, graph: Graph, shape: Any, found: dict[int, KernelParams]) -> tuple[str, Any] | None:
        """The backend's update, then this exec follows ``graph``: None; or the backend's refusal, with
        nothing changed. Once the backend runs the new graph, the exec follows it whatever happens: never
        half updated."""
        backend = self._backend
        try:
            refused = backend.exec_update(self._handle, graph._handle, self._handles)
        except BaseException as exc:
            if isinstance(exc, Exception):  # an error: the backend changed nothing
                raise
            # KeyboardInterrupt (or SystemExit) may stop the backend anywhere, even once the update has
            # taken effect: the same update again makes it whole, then this exec follows it.
            if backend.exec_update(self._handle, graph._handle, self._handles) is None:
                self._follow(graph, shape, found)
            raise
        if refused is None:  # (no check point between the call's return and this try)
            try:
                self._follow(graph, shape, found)
            except BaseException:
                self._follow(graph, shape, found)
                raise
        return refused

    # The nodes setters name

    def _index(self, node: Node, kinds: tuple[NodeKind, ...], api: str) -> int:
        """The position of ``node`` among the nodes this executable graph's setters may name, checked to be of
        ``kinds`` (``api``: the setter, for errors)."""
        if self._handle is None:
            self._check_open(api)
        if self._layout is None:
            self._read_layout()
        index = self._indices.get(getattr(node, "_handle", None))
        if index is None or getattr(node, "graph", None) not in (self.graph, self._source):
            graph = getattr(node, "graph", None)
            if graph is None:  # (every Node has its graph)
                raise TypeError(f"{api}(node): expected a Node, got {describe(node)}")
            if graph is not None and _graph_reads.in_body(graph):  # (CUDA's exec setters take no node of a body either)
                raise GraphError(f"{api}: {node!r} is in a body of a conditional node; an executable graph's "
                                 f"setters change the nodes of its graph's top level only (change a body with "
                                 f"exe.update)")
            if graph in (self.graph, self._source):
                if not _graph_reads.has_node(graph, node):
                    raise GraphError(f"{api}: {node!r} is no longer in its graph ({why_gone(node._handle)}); an "
                                     f"executable graph's setters name nodes of the graph it was made from (CUDA's)")
                layout = self._layout
                place = layout.index.get(handle_of(node)) if layout is not None else None
                if (layout is not None and place is not None and place in self._gone
                        and layout.numbers[place] == number_of(node)):
                    raise GraphError(f"{api}: the node at the place of {node!r} in the graph this executable graph was "
                                     f"made from was removed from that graph (remove_node), and the executable graph's "
                                     f"nodes are addressed through that graph's (CUDA's)")
            raise GraphError(f"{api}: {node!r} is not a node of the graph this executable graph was made "
                             f"from (or last updated with)")
        if node.kind not in kinds:
            names = " or ".join(k.value for k in kinds)
            raise GraphError(f"{api}({node!r}): the node is a {node.kind.value} node, not a {names} node")
        return index

    def _set(self, index: int, params: Any, node: Node, api: str) -> None:
        layout = self._read_layout()  # read already by _index
        refusal = node_refusal(layout.params[index], params)
        if refusal is not None:
            raise GraphUpdateError(refusal[0], node, refusal[1])
        self._changed = True  # first: should the call below be interrupted, the node may be changed
        self._changing_for_kernels()
        self._backend.exec_set_node(self._handle, self._handles[index], params)
        layout.params[index] = params
        self._recorded_events = None  # (an event-record node's event may have changed)
        if _params.in_use:  # without Params there is nothing to note or forget
            self._params.note(index, params)
        self._upload_for_kernels(api)

    def _changing_for_kernels(self) -> None:
        """Before a change of an executable graph kernels may launch (device_launch): it is to be uploaded again for
        them (first: should the change be interrupted, the next launch, change or kernel argument uploads it)."""
        if "device_launch" in self._flags:
            self._stale_for_kernels = True

    def _upload_for_kernels(self, api: str, refused: str = "") -> None:
        """Upload an executable graph kernels may launch (device_launch) again after a change, as CUDA's kernels
        launch it as last uploaded. Should that fail, the change stays (launches from the host run it): kernels
        launch it as last uploaded until an upload succeeds, which its next launch, change or kernel argument
        tries first. ``refused``: what such a retry refuses if it fails (a change's own upload: empty)."""
        if not self._stale_for_kernels:
            return
        try:
            self._backend.exec_upload_for_kernels(self._handle)
        except Exception as exc:
            if refused:
                raise GraphError(f"{api}: an earlier change of {self!r} is not uploaded yet for the kernels that "
                                 f"launch it, and uploading it failed again ({exc}); {refused}") from exc
            raise GraphError(f"{api}: {self!r} changed, but uploading it for the kernels that launch it failed "
                             f"({exc}); launches from the host run the change, and kernels launch it as last "
                             f"uploaded until an upload succeeds: its next launch, change or kernel argument tries "
                             f"again first") from exc
        self._stale_for_kernels = False

    @_serialized
    def _set_params(self, node: Node, args: tuple, grid: Any, block: Any, shared_mem: int | None,
                            kernel: Kernel | None) -> None:
        """``set_params``' every case but the one the compiled core sets itself (ExecState.set_params)."""
        i = self._index(node, _KERNEL, "set_params")
        old = self._read_layout().params[i]
        if "device_launch" in self._flags and any(type(a) is Param for a in args):
            raise TypeError(f"set_params({node!r}): {_DEVICE_LAUNCH_PARAMS}")
        try:
            # (Device's own lookup: the device of its backend at the node's index)
            record = kernel_record(old, args, grid, block, shared_mem, kernel, sibling(self.device, old.device),
                                   self._source, "set_params")
            self._set(i, record, node, "set_params")
        except AttributeRefusal as refusal:  # (the node's attributes, which the backend keeps, refuse the shape)
            raise ValueError(f"set_params({node!r}): {refusal}") from None
        record.kernel.bind_params(record.args)

    @_serialized
    def set_memcpy(self, node: Node, dst: Any, src: Any, nbytes: int | None = None, *, shape: Any = None,
                   dst_origin: Any = None, src_origin: Any = None) -> None:
        """Change a copy node (the rules of ``Graph.add_memcpy``): a 1-D copy, or a box of one row, which may move,
        change size and become 1-D and back. An executable graph's copy of several rows never changes (CUDA's rule:
        ``_update.node_refusal``). See also: cudaGraphExecMemcpyNodeSetParams, and ...ToSymbol/...FromSymbol
        with an Array of ``Device.symbol``."""
        i = self._index(node, (NodeKind.MEMCPY,), "set_memcpy")
        self._set(i, memcpy_record(self.device, dst, src, nbytes, "set_memcpy", shape=shape, dst_origin=dst_origin,
                                   src_origin=src_origin), node, "set_memcpy")

    @_serialized
    def set_memset(self, node: Node, dst: Any, value: Any, count: int | None = None, *, shape: Any = None,
                   origin: Any = None) -> None:
        """Change a memset node: its memory and value; a 2-D memset keeps its shape, a 1-D one stays 1-D (CUDA's
        rule). See also: cudaGraphExecMemsetNodeSetParams."""
        i = self._index(node, (NodeKind.MEMSET,), "set_memset")
        record = memset_record(self.device, dst, value, count, "set_memset", shape=shape, origin=origin)
        self._set(i, record, node, "set_memset")

    @_serialized
    def set_host(self, node: Node, fn: Callable[..., Any], *args: Any) -> None:
        """Change a host node's callable and arguments. See also: cudaGraphExecHostNodeSetParams."""
        i = self._index(node, (NodeKind.HOST,), "set_host")
        self._set(i, host_record(fn, args, "set_host"), node, "set_host")

    @_serialized
    def set_child_graph(self, node: Node, graph: Graph) -> None:
        """Give a child-graph node the parameters of ``graph`` (same topology as the child).

        See also: cudaGraphExecChildGraphNodeSetParams.
        """
        i = self._index(node, (NodeKind.GRAPH,), "set_child_graph")
        if not isinstance(graph, self._graph_type):
            raise TypeError(f"set_child_graph(graph): expected a Graph, got {type(graph).__name__}")
        layout, children = GraphLayout(graph), self._read_layout().children
        check_update(children[i], layout)
        refuse_child_params(graph, node.graph, node._handle)
        self._changed = True
        self._changing_for_kernels()
        self._backend.exec_set_node(self._handle, self._handles[i], ChildGraphParams(graph._handle))
        children[i] = layout
        self._upload_for_kernels("set_child_graph")

    @_serialized
    def set_event(self, node: Node, event: Event) -> None:
        """Change the event of an event record or wait node.

        See also: cudaGraphExecEventRecordNodeSetEvent, cudaGraphExecEventWaitNodeSetEvent.
        """
        i = self._index(node, (NodeKind.EVENT_RECORD, NodeKind.EVENT_WAIT), "set_event")
        self._set(i, event_record(self.device, node.kind, event, "set_event"), node, "set_event")

    @_serialized
    def set_semaphores(self, node: Node, semaphores: Any, values: Any = None) -> None:
        """Change the semaphores and values of a semaphore signal or wait node; the number of semaphores stays (CUDA's
        rule, measured).

        See also: cudaGraphExecExternalSemaphoresSignalNodeSetParams, cudaGraphExecExternalSemaphoresWaitNodeSetParams.
        """
        i = self._index(node, SEMAPHORE_KINDS, "set_semaphores")
        self._set(i, semaphore_record(self.device, node.kind, semaphores, values, "set_semaphores"), node,
                  "set_semaphores")

    @_serialized
    def set_mem_ops(self, node: Node, ops: Any) -> None:
        """Change the operations of a batch memory-op node: their targets and values, and a wait's condition; each
        operation keeps its kind and width (CUDA's rule, measured).

        See also: hipGraphExecBatchMemOpNodeSetParams, cuGraphExecBatchMemOpNodeSetParams.
        """
        i = self._index(node, (NodeKind.MEM_OPS,), "set_mem_ops")
        self._set(i, mem_ops_record(self.device, ops, "set_mem_ops"), node, "set_mem_ops")

    @_serialized
    def is_enabled(self, node: Node) -> bool:
        """Whether a kernel, memcpy or memset node is on in this executable graph (``set_enabled``). The executable
        graph keeps the answer itself, so it is the same on every backend and needs no driver call.

        See also: cudaGraphNodeGetEnabled.
        """
        return self._index(node, (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET), "is_enabled") not in \
            self._disabled

    @_serialized
    def set_enabled(self, node: Node, enabled: bool) -> None:
        """Turn a kernel, memcpy or memset node off (it does nothing) or back on; ``enabled`` is a bool.

        A node stays off through ``update``; while one is off, the executable graph cannot be launched
        into a capture (which would embed the graph with the node on).

        See also: cudaGraphNodeSetEnabled.
        """
        if type(enabled) is not bool and not isinstance(enabled, np.bool_):
            raise TypeError(f"set_enabled(enabled): expected a bool (True or False), got {enabled!r} "
                            f"({type(enabled).__name__})")
        i = self._index(node, (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET), "set_enabled")
        enabled = bool(enabled)
        self._changed = True  # first: should the call below be interrupted, the node may be changed
        if not enabled:
            self._disabled.add(i)
        self._changing_for_kernels()
        self._backend.exec_set_enabled(self._handle, self._handles[i], enabled)
        if enabled:  # only now: until the backend has turned it on, it may be off
            self._disabled.discard(i)
        self._upload_for_kernels("set_enabled")

    # Lifetime

    def close(self) -> None:
        """Release the executable graph; using it afterwards raises GraphError. Idempotent. (Allowed in host
        functions: the backend defers the release, as it does a collected one's.) A graph a kernel may still
        launch (a kernel node, or a launch not yet run, holds it as an argument) is released once none does, and
        on CUDA once the device's queued work has run, as CUDA's user objects are."""
        with self._lock:
            if self._handle is not None:
                self._handle = None
                self._layout = None  # (nor the arguments its records hold: graphs a kernel launches may close)
                if not self._arguments:
                    self._finalizer()
                # (Whom the graph counts as its one live executable graph; a graph it was updated with that has
                # conditional nodes counts it too.)
                for graph in (self.graph, self._source):
                    _graph_reads.let_go(graph, self)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._handle is None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"{len(self.graph)} nodes"
        return f"GraphExec({state}, device={self.device})"

    # Kernels launching it

    def _kernel_argument(self, device: object, where: str) -> ExecArgument:
        """The argument a kernel of ``device`` takes for this graph (``gpugraph._device_launch.exec_argument``): it must
        be instantiated with device_launch (the kernel launches it with cudaGraphLaunch)."""
        with self._lock:  # (a close on another thread comes before or after)
            if self._handle is None:
                raise GraphError(f"{where}: the GraphExec is closed")
            if "device_launch" not in self._flags:
                raise GraphError(f"{where}: {self!r} was not instantiated with device_launch=True, and a kernel "
                                 f"launches only such a graph (CUDA stops the kernel with an illegal address "
                                 f"otherwise, measured on the H200)")
            if self.device is not device:
                raise ValueError(f"{where}: {self!r} is on {self.device}, the kernel on {device}; a kernel launches "
                                 f"graphs of its own device")
            if self._stale_for_kernels:
                self._upload_for_kernels(where, "the argument was not taken")
            argument = ExecArgument(self._backend.exec_device_handle(self._handle))
            argument.exec = self
            key = id(argument)
            self._arguments[key] = weakref.ref(argument, functools.partial(_argument_gone, self, key))
        return argument


_DEVICE_LAUNCH_PARAMS = ("a graph a kernel launches takes no Params: their values are written at launches from the "
                         "host, and a launch from a kernel has none; pass values, and set_params them")



def _argument_gone(exe: GraphExec, key: int, _: Any) -> None:
    """An argument naming ``exe`` was collected: release ``exe`` if it was closed and this was the last one."""
    arguments = exe._arguments
    arguments.pop(key, None)
    if not arguments and exe._handle is None:
        exe._finalizer()  # (idempotent)
