"""The CUDA backend's capture layer: streams and events, and the capture of their work (see _backend)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cuda.bindings import driver as cu

from ... import _params
from ..._errors import BackendError, CaptureError
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._memops import bits
from ..._memory import address_of as address
from ..._nodes import (
    AllocParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
    NodeKind,
    WaitValue,
)
from ..._params import resolve
from .._allocation import Allocation
from . import _leaves
from ._driver import call, error, fail
from ._launch import Function
from ._nodes import add_node, derive_params, describes
from ._objects import CudaCapture, CudaEvent, CudaGraph, CudaSemaphore, CudaStream
from ._runtime import INVALID_CONTEXT, CudaRuntime, allocate, check_allocated
from ._structs import edge_data, kind_of, memcpy3d, semaphore_arrays, wait_flags
from ._symbols import drv

_MEMSET = {1: drv.memset_d8_async, 2: drv.memset_d16_async, 4: drv.memset_d32_async}
_MEMSET_2D = {1: drv.memset_d2d8_async, 2: drv.memset_d2d16_async, 4: drv.memset_d2d32_async}
_NOT_READY = cu.CUresult.CUDA_ERROR_NOT_READY
_MODES = {"global": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
          "thread_local": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
          "relaxed": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED}


class CudaCapturing(CudaRuntime):
    """Streams and events, whose work a capture records: the queue of captured calls and its pairing with the
    nodes the driver made, and the records kept of the nodes of captured and child graphs."""

    # Streams and events

    def stream_create(self, index: int, non_blocking: bool, priority: int) -> CudaStream:
        self.contexts.use(index)
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        return CudaStream(call(drv.stream_create_with_priority, flags, priority), index)

    def stream_default(self, index: int) -> CudaStream:
        return CudaStream(cu.CUstream(cu.CU_STREAM_LEGACY), index)

    def stream_address(self, stream: CudaStream) -> int:
        return int(stream.handle)

    def stream_external(self, index: int, address: int) -> tuple[CudaStream, int, bool, int]:
        self.contexts.use(index)
        handle = cu.CUstream(address)
        try:
            device = int(call(drv.stream_get_device, handle))
        except BackendError as exc:
            raise ValueError(f"the handle {address:#x} is not a CUDA stream handle of this process (the driver "
                             f"says {exc})") from None
        owner = next(i for i, d in enumerate(self.contexts.devices) if int(d) == device)
        flags = int(call(drv.stream_get_flags, handle))
        priority = int(call(drv.stream_get_priority, handle))
        non_blocking = bool(flags & int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
        return CudaStream(handle, owner), owner, non_blocking, priority

    def stream_destroy(self, stream: CudaStream) -> None:
        self._release(self._destroy_stream, stream)

    def _destroy_stream(self, stream: CudaStream) -> None:
        # Its work still runs (the driver finishes it); its host functions' errors surface at the device's
        # next synchronize.
        self.contexts.use(stream.index)
        call(drv.stream_destroy, stream.handle)

    def stream_synchronize(self, stream: CudaStream) -> None:
        self._refuse_in_host_function("Stream.synchronize")
        self.contexts.use(stream.index)
        self._synchronize(drv.stream_synchronize, stream.handle)
        self._flush_releases(called=True)
        pending = self.host.take_error(stream)
        if pending is not None:
            raise pending

    def stream_query(self, stream: CudaStream) -> bool:
        return _done(drv.stream_query, stream.handle)

    def stream_launch(self, stream: CudaStream, function: Function, grid: tuple, block: tuple,
                      shared_mem: int, args: tuple, capture: CudaCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.launch")
        if capture is not None:  # see _captured: the same, for this hot path
            packed = tuple([resolve(a) for a in args]) if _params.in_use else args  # (the node keeps its Params)
            with capture.lock:  # (a with statement: no interrupt between taking the lock and its release's try)
                if capture.active:
                    self._launch_kernel(stream, function, grid, block, shared_mem, packed)
                    capture.graph.pending.append((KernelParams(function.kernel, grid, block, shared_mem, args,
                                                                stream.index), None))
                    return
            args = packed  # the capture ended meanwhile, on another thread: the launch runs uncaptured
        self._launch_kernel(stream, function, grid, block, shared_mem, args)

    def _launch_kernel(self, stream: CudaStream, function: Function, grid: tuple, block: tuple, shared_mem: int,
                       args: tuple) -> None:
        with function.lock:
            params = function.pack(args)
            err = _leaves.launch_kernel(function.raw, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                        shared_mem, stream.raw, params)
            if err:
                if err != INVALID_CONTEXT:
                    fail("cuLaunchKernel", err)
                self._retry_in_context(drv.launch_kernel, stream.index, function.handle, grid[0], grid[1], grid[2],
                                       block[0], block[1], block[2], shared_mem, stream.handle, params, 0)

    def stream_memcpy(self, stream: CudaStream, dst: Any, src: Any, nbytes: int,
                      capture: CudaCapture | None, box: Any = None, pins: tuple = ()) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memcpy")
        self.contexts.use(stream.index)
        arguments = ((drv.memcpy_async, address(dst), address(src), nbytes, stream.handle) if box is None else
                     (drv.memcpy3d_async, memcpy3d(dst, src, nbytes, stream.index, box), stream.handle))
        if capture is not None and self._captured(
                capture, call, arguments, lambda _: (MemcpyParams(dst, src, nbytes, box, pins), None)) is not None:
            return
        check_allocated(dst, src)
        call(*arguments)

    def stream_memset(self, stream: CudaStream, dst: Any, value: Any, pattern: int, element_size: int,
                      count: int, capture: CudaCapture | None, plane: tuple[int, int, int] | None = None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memset")
        self.contexts.use(stream.index)
        if plane is None:
            arguments: tuple = (_MEMSET[element_size], address(dst), pattern, count, stream.handle)
            record = MemsetParams(dst, value, pattern, element_size, count)
        else:
            pitch, rows, offset = plane
            arguments = (_MEMSET_2D[element_size], address(dst) + offset, pitch, pattern, count, rows, stream.handle)
            record = MemsetParams(dst, value, pattern, element_size, count, pitch, rows, offset)
        if capture is not None and self._captured(capture, call, arguments, lambda _: (record, None)) is not None:
            return
        call(*arguments)

    def stream_host(self, stream: CudaStream, fn: Any, args: tuple, capture: CudaCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.host")
        self.contexts.use(stream.index)
        # Captured: added as a node at the frontier (cuda.bindings' cuLaunchHostFunc wrapper frees its callback
        # data after one call, NVIDIA/cuda-python#790, and a captured host node runs at every replay).
        if capture is not None and self._add_at_frontier(capture, stream, HostParams(fn, args)) is not None:
            return
        key = self.host.register(fn, args, stream, one_shot=True)
        call(drv.launch_host_func, stream.handle, self.host.fn, key)

    def stream_alloc(self, stream: CudaStream, nbytes: int, capture: CudaCapture | None) -> tuple[int, Allocation]:
        if HOST_THREADS:
            refuse_in_host_function("Stream.alloc")
        self.contexts.use(stream.index)
        if capture is not None:  # an allocation node, drawing on the graph pool
            access = self.pool_access(stream.index)

            def record(made: Any) -> tuple[AllocParams, Allocation]:
                ptr = int(made)
                alloc = Allocation(ptr, nbytes, "graph", stream.index)
                alloc.access = access
                return AllocParams(nbytes, ptr, stream.index, access), alloc
            entry = self._captured(capture, allocate, (nbytes, "graph", drv.mem_alloc_async, max(nbytes, 1),
                                                       stream.handle), record)
            if entry is not None:
                params, alloc = entry
                return params.ptr, alloc
        ptr = int(allocate(nbytes, "stream-ordered", drv.mem_alloc_async, max(nbytes, 1), stream.handle))
        alloc = Allocation(ptr, nbytes, "stream", stream.index)
        alloc.live = True
        return ptr, alloc

    def stream_free(self, stream: CudaStream, alloc: Allocation, capture: CudaCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.free")
        self.contexts.use(stream.index)
        if capture is not None and self._captured(capture, call, (drv.mem_free_async, alloc.ptr, stream.handle),
                                                  lambda _: (FreeParams(alloc.ptr), alloc)) is not None:
            return True
        call(drv.mem_free_async, alloc.ptr, stream.handle)
        return False

    def stream_wait_event(self, stream: CudaStream, event: CudaEvent, capture: CudaCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.wait")
        self.contexts.use(stream.index)
        if capture is None:
            call(drv.stream_wait_event, stream.handle, event.handle, 0)
            return True
        with capture.lock:  # (``_end`` holds it too: the capture is active throughout, or ended)
            if not capture.active:
                return False  # (the driver refuses a wait for an event recorded in an ended capture)
            call(drv.stream_wait_event, stream.handle, event.handle, 0)  # the driver forks or joins by itself
        return True

    def stream_mem_ops(self, stream: CudaStream, params: Any, capture: CudaCapture | None) -> None:
        (op,) = params.ops
        wait = isinstance(op, WaitValue)
        if HOST_THREADS:
            refuse_in_host_function("Stream.wait_value" if wait else "Stream.write_value")
        self.contexts.use(stream.index)
        at, width, value = bits(op)
        if wait:
            fn = drv.stream_wait_value64 if width == 64 else drv.stream_wait_value32
            arguments: tuple = (fn, stream.handle, at, value, wait_flags(op.condition))
        else:
            fn = drv.stream_write_value64 if width == 64 else drv.stream_write_value32
            arguments = (fn, stream.handle, at, value, 0)
        if capture is not None and self._captured(capture, call, arguments, lambda _: (params, None)) is not None:
            return
        call(*arguments)

    def stream_semaphores(self, stream: CudaStream, params: Any, capture: CudaCapture | None) -> None:
        signal = params.kind is NodeKind.SEMAPHORE_SIGNAL
        if HOST_THREADS:
            refuse_in_host_function(f"Stream.{'signal' if signal else 'wait'}_semaphores")
        self.contexts.use(stream.index)
        handles, items = semaphore_arrays(params)
        arguments = (drv.signal_external_semaphores_async if signal else drv.wait_external_semaphores_async,
                     handles, items, len(handles), stream.handle)
        if capture is not None and self._captured(capture, call, arguments, lambda _: (params, None)) is not None:
            return
        call(*arguments)

    def semaphore_import(self, index: int, handle: Any, timeline: bool) -> CudaSemaphore:
        if isinstance(handle, bool) or not isinstance(handle, int) or handle < 0:
            raise TypeError(f"import_semaphore: CUDA imports a semaphore's file descriptor (an int, such as Vulkan's "
                            f"vkGetSemaphoreFdKHR gives), got {handle!r}")
        self.contexts.use(index)
        desc = cu.CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC()
        kinds = cu.CUexternalSemaphoreHandleType
        desc.type = (kinds.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD if timeline
                     else kinds.CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD)
        desc.handle.fd = handle
        err, semaphore = drv.import_external_semaphore(desc)
        if err:
            kind = "timeline" if timeline else "binary"
            raise ValueError(f"import_semaphore: the driver refuses file descriptor {handle} as a {kind} semaphore: "
                             f"{error('cuImportExternalSemaphore', err)}")
        return CudaSemaphore(semaphore, index, timeline)

    def semaphore_destroy(self, semaphore: CudaSemaphore) -> None:
        # Deferred to the next synchronize (or capture end, or release made at once), whoever drops the semaphore:
        # cuDestroyExternalSemaphore waits for the device's queued work (measured on the H200: a collection
        # destroying one stalled behind a stream waiting on another semaphore for the host to signal), and stream
        # work queued on this one does not hold it, so a destroy at once could wait for work that waits for the host.
        self._deferred.append((self._in_context, (semaphore.index, drv.destroy_external_semaphore, semaphore.handle)))

    def event_create(self, index: int, timing: bool) -> CudaEvent:
        self.contexts.use(index)
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT if timing else cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
        return CudaEvent(call(drv.event_create, flags), index)

    def event_destroy(self, event: CudaEvent) -> None:
        self._release(self._in_context, event.index, drv.event_destroy, event.handle)

    def event_record(self, event: CudaEvent, stream: CudaStream, capture: CudaCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.record")
        self.contexts.use(stream.index)
        if capture is None:
            call(drv.event_record, event.handle, stream.handle)
            return False
        with capture.lock:  # (``_end`` holds it too: recorded in the capture, or after its end)
            call(drv.event_record, event.handle, stream.handle)
            return capture.active

    def event_synchronize(self, event: CudaEvent) -> None:
        self._refuse_in_host_function("Event.synchronize")
        self._synchronize(drv.event_synchronize, event.handle)
        self._flush_releases(called=True)

    def event_query(self, event: CudaEvent) -> bool:
        return _done(drv.event_query, event.handle)

    def event_elapsed_ms(self, start: CudaEvent, end: CudaEvent) -> float:
        err, ms = drv.event_elapsed_time(start.handle, end.handle)
        if err == cu.CUresult.CUDA_ERROR_INVALID_HANDLE:  # what the driver says of a never-recorded event
            raise ValueError("elapsed_ms: both events must have been recorded")
        if err:
            raise error("cuEventElapsedTime", err)
        return float(ms)

    # Capture

    def thread_capture_mode(self, mode: str) -> None:
        call(drv.thread_exchange_stream_capture_mode, _MODES[mode])

    def capture_id(self, capture: CudaCapture) -> int:
        return capture.id

    def capture_create(self, stream: CudaStream, mode: str, graph: CudaGraph | None) -> CudaCapture:
        return CudaCapture(stream, _MODES[mode], graph)

    def capture_begin(self, capture: CudaCapture, deps: Sequence[Any]) -> CudaGraph:
        stream, graph = capture.origin, capture.graph
        self.contexts.use(stream.index)
        try:
            with self._lock:  # first: a garbage-collected Array freed from now on must wait for the end
                self._captures.add(capture)
            if graph is None:
                graph = CudaGraph(self._begin_capture(stream, capture.mode), stream.index)
                graph.before = set()  # (no node yet; nodes added explicitly meanwhile are noted here)
                capture.graph, capture.lock = graph, graph.lock
            else:
                self._settle(graph)  # (entries of another capture into it, paired before its nodes count as old)
                with graph.lock:
                    graph.before = set(self.graph_nodes(graph))
                call(drv.stream_begin_capture_to_graph, stream.handle, graph.handle, list(deps), None, len(deps),
                     capture.mode)
            capture.active = True
            capture.id = int(call(drv.stream_get_capture_info, stream.handle)[1])
        except BaseException as exc:
            # Noted already (interrupted on the way out): the front end sees the exception and aborts it. Not
            # noted: it must not be running in the driver either.
            if not capture.active:
                if not isinstance(exc, BackendError):  # interrupted (KeyboardInterrupt): the driver may have begun
                    self._end_unnoted(stream, capture.into)
                with self._lock:
                    self._captures.discard(capture)
            raise
        return graph

    def _end_unnoted(self, stream: CudaStream, into: bool) -> None:
        """End a capture the driver began on ``stream`` before gpugraph noted it, discarding its graph."""
        err, status = drv.stream_is_capturing(stream.handle)
        if err or status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return
        err, handle = self._end_capture(stream)
        if not err and handle is not None and int(handle) and not into:
            call(drv.graph_destroy, handle)

    def _begin_capture(self, stream: CudaStream, mode: Any) -> Any:
        """Begin a capture on ``stream`` into a graph the driver makes, and return that graph's handle. (Begun
        but its graph not told: the capture is ended, its graph destroyed, and the error raised.)"""
        err = _leaves.begin_capture(stream.raw, int(mode))
        if err:
            fail("cuStreamBeginCapture", err)
        try:
            err, graph = _leaves.capture_graph(stream.raw)
            if err:
                fail("cuStreamGetCaptureInfo", err)
            return cu.CUgraph(graph)
        except BackendError:
            self._end_unnoted(stream, False)
            raise

    def _end_capture(self, stream: CudaStream) -> tuple[Any, Any]:
        """cuStreamEndCapture: (the driver's result, the graph's handle or None), as cuda-bindings returns them."""
        err, graph = _leaves.end_capture(stream.raw)
        return cu.CUresult(err), cu.CUgraph(graph) if graph else None

    def _capture_info(self, stream: CudaStream) -> tuple:
        return call(drv.stream_get_capture_info, stream.handle)  # (status, id, graph, deps, edge data, count)

    def _captured(self, capture: CudaCapture, fn: Any, args: tuple, record: Any) -> tuple[Any, Any] | None:
        """Make a call that the capture turns into one node, and queue (and return) that node's entry:
        ``record(what the call returned)``, the node's parameter record and, for an allocation or free node,
        the allocation record (else None). None, the call not made, if the capture has ended meanwhile (on
        another thread): the caller makes it as uncaptured work.

        The entries are paired with their nodes when first needed (``_settle``): querying the new node at
        each call (cuStreamGetCaptureInfo) would cost as much as the captured call itself. The capture's
        lock keeps the queue in the order in which the driver made the nodes, across threads.
        """
        with capture.lock:  # (``_end`` holds it too: the capture is active throughout, or ended)
            if not capture.active:
                return None
            entry = record(fn(*args))
            capture.graph.pending.append(entry)
        return entry

    def _settle(self, graph: CudaGraph) -> None:
        """Pair the queued entries of captured calls with the nodes the driver made for them: each node gets
        its parameter record and, for an allocation or free node, its allocation record."""
        if not graph.pending:
            return
        with graph.lock:  # a call captured on another thread meanwhile would leave a node without its entry
            if graph.pending:  # another thread may have paired them while this one waited
                self._pair(graph, graph.pending)
                graph.pending = []

    def _pair(self, graph: CudaGraph, pending: list[tuple[Any, Allocation | None]]) -> None:
        params, children, foreign, before = graph.params, graph.children, graph.foreign, graph.before or ()
        fresh = self.graph_nodes(graph)
        if params or children or foreign or before:  # (else all are: a capture's first pairing, the common case)
            fresh = [n for n in fresh if n not in params and n not in children and n not in foreign and n not in before]
        if len(fresh) == len(pending):  # each captured call made one node, in order (the common case)
            paired: Any = zip(fresh, pending)
        else:
            # Other libraries' work was captured in between: pair each entry with the next node its record
            # describes; the nodes left over are theirs (their parameters are read back from the driver).
            queue = iter(pending)
            wanted = next(queue, None)
            paired = []
            for node in fresh:
                if wanted is not None and describes(wanted[0], derive_params(self, graph, node)):
                    paired.append((node, wanted))
                    wanted = next(queue, None)
                else:
                    foreign.add(node)
        memory = graph.memory
        for node, (record, alloc) in paired:
            params[node] = record
            if alloc is not None:
                memory[node] = alloc

    def _add_at_frontier(self, capture: CudaCapture, stream: CudaStream, params: Any) -> Any:
        """Add a node after the capture frontier of ``stream`` and make it the new frontier; None (nothing
        added) if the capture has ended meanwhile, on another thread."""
        graph = capture.graph
        with graph.lock:  # the node and its records appear together to a pairing on another thread
            if not capture.active:
                return None
            node = add_node(self, graph, params, self.capture_dependencies(capture, stream))
            self.capture_set_dependencies(capture, stream, [node])
            self._keep_records(graph, node, params)
        return node

    def _end(self, capture: CudaCapture) -> tuple[Any, Any]:
        stream = capture.origin
        try:
            self.contexts.use(stream.index)
            # Under the lock of captured calls: one on another thread is recorded and queued before the end, or
            # finds the capture inactive after it and is made as uncaptured work.
            with capture.lock:
                try:
                    err, handle = self._end_capture(stream)
                    if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
                        return err, handle  # the capture goes on: it must be ended from the thread that began it
                    capture.active = False
                except BaseException:  # (before the lock is released: no captured call finds it active)
                    self._note_if_ended(capture)
                    raise
            self._forget_capture(capture)
        except BaseException:
            # Interrupted (KeyboardInterrupt): once the driver has ended the capture, gpugraph must forget it too.
            if self._note_if_ended(capture):
                self._forget_capture(capture)
            raise
        self._flush_releases(called=True)
        return err, handle

    def _note_if_ended(self, capture: CudaCapture) -> bool:
        """After an interrupted end: whether the driver ended the capture (then noted inactive)."""
        err, status = drv.stream_is_capturing(capture.origin.handle)
        if not err and status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            capture.active = False
            return True
        return False

    def _forget_capture(self, capture: CudaCapture) -> None:
        """The driver ended ``capture``: no stream takes part in it any more. Idempotent."""
        capture.active = False
        with self._lock:
            self._captures.discard(capture)

    def capture_end(self, capture: CudaCapture) -> CudaGraph:
        graph = capture.graph
        err, _ = self._end(capture)
        if err:
            graph.pending = []
            reason = error("cuStreamEndCapture", err)
            raise CaptureError(f"the CUDA driver refused the capture: {reason} (work that another library "
                               f"issued on a captured stream can cause this)", api="cuStreamEndCapture")
        self._settle(graph)
        return graph

    def capture_abort(self, capture: CudaCapture) -> None:
        if not capture.active:
            return
        capture.graph.pending = []  # the nodes they describe are discarded
        err, handle = self._end(capture)
        if not err and handle is not None and not capture.into:
            call(drv.graph_destroy, handle)

    def capture_active(self, capture: CudaCapture) -> bool:
        return capture.active

    def capture_dependencies(self, capture: CudaCapture, stream: CudaStream) -> list[Any]:
        info = self._capture_info(stream)  # (the driver's own: it forks and joins streams by itself)
        return list(info[3])[:info[5]]

    def capture_dependency_kinds(self, capture: CudaCapture, stream: CudaStream) -> list[str]:
        info = self._capture_info(stream)
        data = list(info[4])[:info[5]] if info[4] else []
        return [kind_of(edge) for edge in data] if data else ["full"] * info[5]

    def capture_set_dependencies(self, capture: CudaCapture, stream: CudaStream, deps: Sequence[Any],
                                 kinds: Sequence[str] | None = None) -> None:
        data = None if kinds is None else [edge_data(kind) for kind in kinds]
        call(drv.stream_update_capture_dependencies, stream.handle, list(deps), data, len(deps),
             cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)

    # Records of nodes (captured, or of the graphs child-graph nodes embed)

    def graph_nodes(self, graph: CudaGraph) -> list[Any]:
        nodes = _leaves.graph_nodes(int(graph.handle))
        if isinstance(nodes, int):
            fail("cuGraphGetNodes", nodes)
        return nodes

    def _keep_records(self, graph: CudaGraph, node: Any, params: Any) -> None:
        """Keep the record of a node gpugraph made in a capture's graph without a captured call (the front end
        reads it from here); for a child graph, keep the copy the driver embedded, with the records of the
        child's nodes kept here (paired in creation order, which a copy keeps)."""
        if params.kind is not NodeKind.GRAPH:
            graph.params[node] = params
            return
        graph.children[node] = self.embedded_copy(params.graph, call(drv.graph_child_graph_node_get_graph, node))

    def embedded_copy(self, source: CudaGraph, handle: Any) -> CudaGraph:
        """The CudaGraph of ``handle``, a copy the driver made of ``source`` (a clone, or a child graph's copy),
        with the records of ``source``'s nodes given to their copies: paired in creation order, which a copy
        keeps (one node listing of each graph, no per-node query)."""
        self._settle(source)
        embedded = CudaGraph(handle, source.index)
        for original, copy in zip(self.graph_nodes(source), self.graph_nodes(embedded)):
            if original in source.params:
                embedded.params[copy] = source.params[original]
            if original in source.host_keys:
                embedded.host_keys[copy] = source.host_keys[original]
            if original in source.memory:
                embedded.memory[copy] = source.memory[original]
            if original in source.foreign:
                embedded.foreign.add(copy)
            if original in source.children:
                embedded.children[copy] = self.embedded_copy(source.children[original],
                                                         call(drv.graph_child_graph_node_get_graph, copy))
        return embedded



def _done(query: Any, handle: Any) -> bool:
    """A stream or event query: True when its work has finished, False while it is pending."""
    (err,) = query(handle)
    if err == _NOT_READY:
        return False
    if err:
        raise error(query.__name__, err)
    return True
