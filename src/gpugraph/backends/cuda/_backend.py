"""CudaBackend: gpugraph's backend protocol on the CUDA driver API.

Each call maps to one driver call with a HIP twin (cuGraphAddKernelNode/hipGraphAddKernelNode,
cuModuleLaunchKernel/hipModuleLaunchKernel, ...), so a HIP backend can mirror this file.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ... import _params
from ..._errors import BackendError, CaptureError, GpuGraphError, raise_stream_errors
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._memory import Array
from ..._nodes import (
    AllocParams,
    ChildGraphParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
    NodeKind,
)
from ..._params import resolve
from .. import _exit as at_exit
from .._allocation import Allocation
from .._graph_memory import GraphMemoryRules
from ._compile import ModuleCache
from ._driver import Contexts, call, error, listed
from ._host import HostCalls
from ._launch import Function
from ._nodes import add_node, address, derive_params, param_patcher, set_exec_node
from ._objects import CudaCapture, CudaEvent, CudaExec, CudaGraph, CudaStream

_MODES = {"global": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL,
          "thread_local": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
          "relaxed": cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED}
_MEMSET = {1: cu.cuMemsetD8Async, 2: cu.cuMemsetD16Async, 4: cu.cuMemsetD32Async}
_ATTR = cu.CUgraphMem_attribute
_POINTER = cu.CUpointer_attribute
_DEVICE_MEMORY = (int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE), int(cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED))
_INVALID_CONTEXT = cu.CUresult.CUDA_ERROR_INVALID_CONTEXT
_NOT_READY = cu.CUresult.CUDA_ERROR_NOT_READY
_INVALID_VALUE = cu.CUresult.CUDA_ERROR_INVALID_VALUE
_OUT_OF_MEMORY = cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
_RESULT = cu.CUgraphExecUpdateResult
# The driver's update refusals in the words of gpugraph._update's rules.
_UPDATE_REASONS = {_RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: "topology changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: "node kind changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: "kernel function changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE: "kernel function changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED: "parameters changed",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: "unsupported node kind",
                   _RESULT.CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: "attributes changed"}


class CudaBackend:
    """Implements ``gpugraph.backends._protocol.Backend`` on NVIDIA GPUs."""

    name = "cuda"
    speaks_cuda = True
    dlpack_device_type = 2  # kDLCUDA

    def __init__(self, count: int) -> None:
        self.contexts = Contexts(count)
        self.host = HostCalls()
        self._modules = ModuleCache()
        self._functions: dict[tuple[int, Any], Function] = {}
        self._kernels_by_handle: dict[int, Any] = {}
        # The origin streams of captures in progress: frees of plain memory wait until there is none. A set, so
        # that forgetting a capture twice (an end interrupted and finished again) is harmless.
        self._captures: set[CudaStream] = set()
        # Releases waiting for the end of captures (or of a host function). One deque for the backend's life:
        # host-function threads append without the lock, and an append is never lost to a drain.
        self._deferred: collections.deque[tuple[Any, tuple]] = collections.deque()
        # Reentrant: garbage collection can run a finalizer, which takes this lock, at any allocation,
        # including one made while this thread already holds it.
        self._lock = threading.RLock()
        self.contexts.use(0)
        self._raised: set[int] = set()  # the driver errors synchronize calls raised (see _synchronize)
        self._exit_waiter = at_exit.ExitWaiter("gpugraph-cuda-exit")
        atexit.register(self._finish_at_exit)

    # Devices

    def device_count(self) -> int:
        return len(self.contexts.devices)

    def device_name(self, index: int) -> str:
        name = call(cu.cuDeviceGetName, 256, self.contexts.devices[index])
        return name.split(b"\0", 1)[0].decode()

    def device_synchronize(self, index: int) -> None:
        self._refuse_in_host_function("Device.synchronize")
        self.contexts.use(index)
        self._synchronize(cu.cuCtxSynchronize)
        self._flush_releases()
        # The error of every stream of the device, destroyed streams' included (None: a graph's host node
        # whose launch stream is unknown); each is reported once, as the CPU backend does.
        errors = self.host.errors
        raise_stream_errors([errors.pop(stream) for stream in list(errors)
                             if stream is None or stream.index == index])

    def _synchronize(self, fn: Any, *args: Any) -> None:
        """A synchronize call; the errors it raises are noted, so that the exit does not report them again
        (an error such as an illegal address stays in the context: every later synchronize returns it)."""
        result = fn(*args)[0]
        if result != cu.CUresult.CUDA_SUCCESS:
            self._raised.add(int(result))
            raise error(fn.__name__, result)

    def _finish_at_exit(self) -> None:
        """At interpreter exit: let the work queued on every device this process used finish (the driver
        neither waits for it nor reports its errors), waiting at most $GPUGRAPH_EXIT_TIMEOUT seconds, then
        say on stderr what did not finish and which errors no synchronize reported. As the CPU backend."""
        if self._exit_waiter.forked:  # a forked child: CUDA contexts do not cross fork
            return
        timeout = at_exit.exit_timeout()
        devices = self.contexts.retained()
        failures: dict[int, BaseException] = {}
        finished: list[int] = []

        def finish() -> None:
            for index in devices:
                try:
                    self.contexts.use(index)
                    result = cu.cuCtxSynchronize()[0]
                    if result != cu.CUresult.CUDA_SUCCESS and int(result) not in self._raised:
                        failures[index] = error("cuCtxSynchronize", result)
                except BackendError as exc:  # the context is gone (another library reset it): said below
                    failures[index] = exc
                finished.append(index)

        if not self._exit_waiter.run(finish, timeout):
            waiting = [index for index in devices if index not in finished]
            if waiting:  # (none: it finished just after the wait ended)
                at_exit.unfinished(f"CUDA device{'s' if len(waiting) > 1 else ''} "
                                   f"{', '.join(map(str, waiting))}", timeout)
        for index, failure in list(failures.items()):
            at_exit.never_reported(f"CUDA device {index}", failure)
        for stream, host_error in list(self.host.errors.items()):
            at_exit.never_reported("a CUDA stream" if stream is not None else "a CUDA graph's host node",
                                   host_error)

    def _refuse_in_host_function(self, api: str) -> None:
        refuse_in_host_function(api)  # the rule every backend applies (gpugraph._host_threads)

    # Memory

    def mem_alloc(self, index: int, nbytes: int) -> tuple[int, Allocation]:
        if HOST_THREADS:
            refuse_in_host_function("a device allocation (Device.empty, Device.zeros, Device.asarray)")
        self.contexts.use(index)
        ptr = int(_allocate(nbytes, "device", cu.cuMemAlloc, max(nbytes, 1)))
        return ptr, Allocation(ptr, nbytes, "device", index)

    def _release(self, fn: Any, *args: Any) -> None:
        """Release a driver object for a garbage-collected Python object. While a capture runs (or from a
        host function) the release waits: destroying or freeing may synchronize, which invalidates
        captures, and host functions must not call CUDA."""
        if getattr(self.host.local, "running", False):
            # Without the lock, which a release that waits for us may hold (deque.append is atomic).
            self._deferred.append((fn, args))
            return
        with self._lock:  # held through the release, so no capture can begin on another thread meanwhile
            if self._captures:
                self._deferred.append((fn, args))
                return
            fn(*args)

    def _flush_releases(self) -> None:
        """Run the releases that waited, once no capture runs; the first failure is raised after all ran.

        Each is taken from the deque and run under the lock, as ``_release`` runs one, so no capture begins
        meanwhile; releases deferred while the flush runs are run by it too."""
        deferred = self._deferred
        if not deferred or getattr(self.host.local, "running", False):
            return
        failure = None
        while True:
            with self._lock:
                if self._captures or not deferred:
                    break
                fn, args = deferred.popleft()
                try:
                    fn(*args)
                except BackendError as exc:
                    failure = failure or exc
        if failure is not None:
            raise failure

    def mem_free(self, alloc: Allocation) -> None:
        self._release(self._free_now, alloc)

    def _free_now(self, alloc: Allocation) -> None:
        self.contexts.use(alloc.index)
        call(cu.cuMemFree, alloc.ptr)

    def pinned_empty(self, index: int, nbytes: int) -> np.ndarray:
        if HOST_THREADS:
            refuse_in_host_function("Device.pinned")
        self.contexts.use(index)
        ptr = int(_allocate(nbytes, "page-locked host", cu.cuMemHostAlloc, max(nbytes, 1), 0))
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr)
        weakref.finalize(raw, self._release, self._in_context, index, cu.cuMemFreeHost, ptr).atexit = False
        # ctypes arrays export the buffer protocol; NumPy's stubs name buffer types one by one before Python 3.12.
        return np.frombuffer(raw, np.uint8, count=nbytes)  # type: ignore[call-overload]

    def host_memory_pinned(self, index: int, ptr: int, nbytes: int) -> bool:
        # The driver knows page-locked memory (cuMemHostAlloc, cuMemHostRegister, other libraries' pinned
        # memory), not pageable memory. Both ends are asked, for a range that starts in page-locked memory
        # and runs past it.
        self.contexts.use(index)
        return all(_memory_type(at) is not None for at in {ptr, ptr + max(nbytes, 1) - 1})

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        _check_allocated(dst, src)
        self.contexts.use(_index(dst, src))
        call(cu.cuMemcpy, address(dst), address(src), nbytes)

    def data_address(self, array: Any) -> int:
        return array.ptr

    def export_memory(self, array: Any) -> tuple[int, Any]:
        return array.ptr, None  # the Array keeps its allocation; a view used after a free is undefined, as in CUDA

    def mem_import(self, index: int, ptr: int, nbytes: int) -> Allocation:
        if nbytes:  # an empty array may give any address (the CUDA Array Interface says 0)
            self.contexts.use(index)
            kind = _memory_type(ptr)
            if kind is None:
                raise ValueError(f"the memory at {ptr:#x} is not CUDA memory (the driver does not know the address: "
                                 f"pageable host memory, say)")
            if kind not in _DEVICE_MEMORY:
                raise ValueError(f"the memory at {ptr:#x} is page-locked host memory, not device memory")
            ordinal = int(call(cu.cuPointerGetAttribute, _POINTER.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr))
            if ordinal != index:
                raise ValueError(f"the memory at {ptr:#x} is on cuda:{ordinal}, not cuda:{index}")
        return Allocation(ptr, nbytes, "device", index, owner=f"imported memory at {ptr:#x}")

    def graph_memory(self, index: int) -> dict[str, int]:
        device = self.contexts.devices[index]
        read = lambda attr: int(call(cu.cuDeviceGetGraphMemAttribute, device, attr))  # noqa: E731
        return {"used": read(_ATTR.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT),
                "reserved": read(_ATTR.CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
                "used_high": read(_ATTR.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH),
                "reserved_high": read(_ATTR.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)}

    def graph_memory_trim(self, index: int) -> None:
        self.contexts.use(index)
        call(cu.cuDeviceGraphMemTrim, self.contexts.devices[index])

    # Kernels

    def kernel_load(self, index: int, kernel: Any) -> Function:
        key = (index, kernel)
        function = self._functions.get(key)
        if function is None:
            self.contexts.use(index)
            handle = self._modules.function(index, self.contexts.devices[index], kernel)
            function = self._functions[key] = Function(handle, kernel)
            self._kernels_by_handle[int(handle)] = kernel
        return function

    def function(self, index: int, kernel: Any) -> Function:
        return self._functions.get((index, kernel)) or self.kernel_load(index, kernel)

    def kernel_of(self, handle: Any) -> Any:
        return self._kernels_by_handle.get(int(handle))

    # Streams and events

    def stream_create(self, index: int, non_blocking: bool, priority: int) -> CudaStream:
        self.contexts.use(index)
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING if non_blocking else cu.CUstream_flags.CU_STREAM_DEFAULT
        return CudaStream(call(cu.cuStreamCreateWithPriority, flags, priority), index)

    def stream_default(self, index: int) -> CudaStream:
        return CudaStream(cu.CUstream(cu.CU_STREAM_LEGACY), index)

    def stream_address(self, stream: CudaStream) -> int:
        return int(stream.handle)

    def stream_external(self, index: int, address: int) -> tuple[CudaStream, int, bool, int]:
        self.contexts.use(index)
        handle = cu.CUstream(address)
        try:
            device = int(call(cu.cuStreamGetDevice, handle))
        except BackendError as exc:
            raise ValueError(f"the handle {address:#x} is not a CUDA stream handle of this process (the driver "
                             f"says {exc})") from None
        owner = next(i for i, d in enumerate(self.contexts.devices) if int(d) == device)
        flags = int(call(cu.cuStreamGetFlags, handle))
        priority = int(call(cu.cuStreamGetPriority, handle))
        non_blocking = bool(flags & int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
        return CudaStream(handle, owner), owner, non_blocking, priority

    def stream_destroy(self, stream: CudaStream) -> None:
        self._release(self._destroy_stream, stream)

    def _destroy_stream(self, stream: CudaStream) -> None:
        # Its work still runs (the driver finishes it); its host functions' errors surface at the device's
        # next synchronize.
        self.contexts.use(stream.index)
        call(cu.cuStreamDestroy, stream.handle)

    def stream_synchronize(self, stream: CudaStream) -> None:
        self._refuse_in_host_function("Stream.synchronize")
        self.contexts.use(stream.index)
        self._synchronize(cu.cuStreamSynchronize, stream.handle)
        self._flush_releases()
        pending = self.host.take_error(stream)
        if pending is not None:
            raise pending

    def stream_query(self, stream: CudaStream) -> bool:
        return _done(cu.cuStreamQuery, stream.handle)

    def _retry_in_context(self, fn: Any, index: int, *args: Any) -> None:
        """A hot call failed: make the context current (a new thread) and call once more."""
        self.contexts.use(index)
        call(fn, *args)

    def stream_launch(self, stream: CudaStream, function: Function, grid: tuple, block: tuple,
                      shared_mem: int, args: tuple) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.launch")
        capture = stream.capture
        if capture is not None:  # see _captured: the same, inlined for this hot path
            capture.lock.acquire()
            packed = tuple([resolve(a) for a in args]) if _params.in_use else args
        else:
            packed = args
        try:
            with function.lock:
                params = function.pack(packed)
                (err,) = cu.cuLaunchKernel(function.handle, grid[0], grid[1], grid[2], block[0], block[1],
                                           block[2], shared_mem, stream.handle, params, 0)
                if err:
                    if err != _INVALID_CONTEXT:
                        raise error("cuLaunchKernel", err)
                    self._retry_in_context(cu.cuLaunchKernel, stream.index, function.handle, grid[0], grid[1],
                                           grid[2], block[0], block[1], block[2], shared_mem, stream.handle,
                                           params, 0)
            if capture is not None:
                capture.graph.pending.append((KernelParams(function.kernel, grid, block, shared_mem, args), None))
        finally:
            if capture is not None:
                capture.lock.release()

    def stream_memcpy(self, stream: CudaStream, dst: Any, src: Any, nbytes: int) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memcpy")
        if stream.capture is None:
            _check_allocated(dst, src)
        self.contexts.use(stream.index)
        if stream.capture is not None:
            self._captured(stream, call, (cu.cuMemcpyAsync, address(dst), address(src), nbytes, stream.handle),
                           lambda _: (MemcpyParams(dst, src, nbytes), None))
            return
        call(cu.cuMemcpyAsync, address(dst), address(src), nbytes, stream.handle)

    def stream_memset(self, stream: CudaStream, dst: Any, value: Any, pattern: int, element_size: int,
                      count: int) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memset")
        self.contexts.use(stream.index)
        arguments = (_MEMSET[element_size], address(dst), pattern, count, stream.handle)
        if stream.capture is not None:
            self._captured(stream, call, arguments,
                           lambda _: (MemsetParams(dst, value, pattern, element_size, count), None))
            return
        call(*arguments)

    def stream_host(self, stream: CudaStream, fn: Any, args: tuple) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.host")
        self.contexts.use(stream.index)
        if stream.capture is not None:
            # Added as a node at the frontier: cuda.bindings' cuLaunchHostFunc wrapper frees its callback
            # data after one call (NVIDIA/cuda-python#790), and a captured host node runs at every replay.
            self._add_at_frontier(stream, HostParams(fn, args))
            return
        key = self.host.register(fn, args, stream, one_shot=True)
        call(cu.cuLaunchHostFunc, stream.handle, self.host.fn, key)

    def stream_alloc(self, stream: CudaStream, nbytes: int) -> tuple[int, Allocation]:
        if HOST_THREADS:
            refuse_in_host_function("Stream.alloc")
        self.contexts.use(stream.index)
        capture = stream.capture
        if capture is not None:  # an allocation node, drawing on the graph pool
            def record(made: Any) -> tuple[AllocParams, Allocation]:
                ptr = int(made)
                return AllocParams(nbytes, ptr), Allocation(ptr, nbytes, "graph", stream.index)
            params, alloc = self._captured(stream, _allocate, (nbytes, "graph", cu.cuMemAllocAsync, max(nbytes, 1),
                                                               stream.handle), record)
            ptr = params.ptr
        else:
            ptr = int(_allocate(nbytes, "stream-ordered", cu.cuMemAllocAsync, max(nbytes, 1), stream.handle))
            alloc = Allocation(ptr, nbytes, "stream", stream.index)
            alloc.live = True
        return ptr, alloc

    def stream_free(self, stream: CudaStream, alloc: Allocation) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.free")
        self.contexts.use(stream.index)
        if stream.capture is not None:
            self._captured(stream, call, (cu.cuMemFreeAsync, alloc.ptr, stream.handle),
                           lambda _: (FreeParams(alloc.ptr), alloc))
            return
        call(cu.cuMemFreeAsync, alloc.ptr, stream.handle)

    def stream_wait_event(self, stream: CudaStream, event: CudaEvent) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.wait")
        self.contexts.use(stream.index)
        call(cu.cuStreamWaitEvent, stream.handle, event.handle, 0)
        capture = event.capture
        if capture is not None and capture.active and stream.capture is None:
            stream.capture = capture  # the driver forked this stream into the capture
            capture.streams.append(stream)

    def event_create(self, index: int, timing: bool) -> CudaEvent:
        self.contexts.use(index)
        flags = cu.CUevent_flags.CU_EVENT_DEFAULT if timing else cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
        return CudaEvent(call(cu.cuEventCreate, flags), index)

    def event_destroy(self, event: CudaEvent) -> None:
        self._release(self._in_context, event.index, cu.cuEventDestroy, event.handle)

    def _in_context(self, index: int, fn: Any, *args: Any) -> None:
        """A release from whatever thread the garbage collector runs on: set the device's context first."""
        self.contexts.use(index)
        call(fn, *args)

    def event_record(self, event: CudaEvent, stream: CudaStream) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.record")
        self.contexts.use(stream.index)
        call(cu.cuEventRecord, event.handle, stream.handle)
        event.capture = stream.capture

    def event_synchronize(self, event: CudaEvent) -> None:
        self._refuse_in_host_function("Event.synchronize")
        self._synchronize(cu.cuEventSynchronize, event.handle)

    def event_query(self, event: CudaEvent) -> bool:
        return _done(cu.cuEventQuery, event.handle)

    def event_elapsed_ms(self, start: CudaEvent, end: CudaEvent) -> float:
        err, ms = cu.cuEventElapsedTime(start.handle, end.handle)
        if err == cu.CUresult.CUDA_ERROR_INVALID_HANDLE:  # what the driver says of a never-recorded event
            raise ValueError("elapsed_ms: both events must have been recorded")
        if err:
            raise error("cuEventElapsedTime", err)
        return float(ms)

    # Capture

    def stream_begin_capture(self, stream: CudaStream, mode: str, graph: CudaGraph | None,
                             deps: Sequence[Any]) -> CudaGraph:
        self.contexts.use(stream.index)
        into = graph is not None
        try:
            with self._lock:  # first: a garbage-collected Array freed from now on must wait for the end
                self._captures.add(stream)
            if graph is None:
                call(cu.cuStreamBeginCapture, stream.handle, _MODES[mode])
                graph = CudaGraph(self._capture_info(stream)[2], stream.index)
            else:
                self._settle(graph)  # (entries of another capture into it, paired before its nodes count as old)
                with graph.lock:
                    graph.before = set(self.graph_nodes(graph))
                call(cu.cuStreamBeginCaptureToGraph, stream.handle, graph.handle, list(deps), None, len(deps),
                     _MODES[mode])
            stream.capture = CudaCapture(graph, into, stream)
        except BaseException as exc:
            # Noted already (interrupted on the way out): the front end sees the exception and aborts it. Not
            # noted: it must not be running in the driver either.
            if stream.capture is None:
                if not isinstance(exc, BackendError):  # interrupted (KeyboardInterrupt): the driver may have begun
                    self._end_unnoted(stream, into)
                with self._lock:
                    self._captures.discard(stream)
            raise
        return graph

    def _end_unnoted(self, stream: CudaStream, into: bool) -> None:
        """End a capture the driver began on ``stream`` before gpugraph noted it, discarding its graph."""
        err, status = cu.cuStreamIsCapturing(stream.handle)
        if err or status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
            return
        err, handle = cu.cuStreamEndCapture(stream.handle)
        if not err and handle is not None and int(handle) and not into:
            call(cu.cuGraphDestroy, handle)

    def _capture_info(self, stream: CudaStream) -> tuple:
        return call(cu.cuStreamGetCaptureInfo, stream.handle)  # (status, id, graph, deps, edge data, count)

    def _captured(self, stream: CudaStream, fn: Any, args: tuple, record: Any) -> tuple[Any, Any]:
        """Make a call that the capture turns into one node, and queue (and return) that node's entry:
        ``record(what the call returned)``, the node's parameter record and, for an allocation or free node,
        the allocation record (else None).

        The entries are paired with their nodes when first needed (``_settle``): querying the new node at
        each call (cuStreamGetCaptureInfo) would cost as much as the captured call itself. The capture's
        lock keeps the queue in the order in which the driver made the nodes, across threads.
        """
        capture = _capture_of(stream)
        with capture.lock:
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
        fresh = [n for n in self.graph_nodes(graph)
                 if n not in params and n not in children and n not in foreign and n not in before]
        if len(fresh) == len(pending):  # each captured call made one node, in order (the common case)
            paired: Any = zip(fresh, pending)
        else:
            # Other libraries' work was captured in between: pair each entry with the next node its record
            # describes; the nodes left over are theirs (their parameters are read back from the driver).
            queue = iter(pending)
            wanted = next(queue, None)
            paired = []
            for node in fresh:
                if wanted is not None and _describes(wanted[0], derive_params(self, graph, node)):
                    paired.append((node, wanted))
                    wanted = next(queue, None)
                else:
                    foreign.add(node)
        memory = graph.memory
        for node, (record, alloc) in paired:
            params[node] = record
            if alloc is not None:
                memory[node] = alloc

    def _add_at_frontier(self, stream: CudaStream, params: Any) -> Any:
        """Add a node after the capture frontier of ``stream`` and make it the new frontier."""
        graph = _capture_of(stream).graph
        with graph.lock:  # the node and its records appear together to a pairing on another thread
            node = add_node(self, graph, params, self.stream_capture_dependencies(stream))
            self.stream_set_capture_dependencies(stream, [node])
            self._keep_records(graph, node, params)
        return node

    def _end(self, stream: CudaStream) -> tuple[Any, Any]:
        capture = _capture_of(stream)
        try:
            self.contexts.use(stream.index)
            err, handle = cu.cuStreamEndCapture(stream.handle)
            if err == cu.CUresult.CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
                return err, handle  # the capture goes on: it must be ended from the thread that began it
            self._forget_capture(capture)
        except BaseException:
            # Interrupted (KeyboardInterrupt): once the driver has ended the capture, gpugraph must forget it too.
            err, status = cu.cuStreamIsCapturing(stream.handle)
            if not err and status == cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
                self._forget_capture(capture)
            raise
        self._flush_releases()
        return err, handle

    def _forget_capture(self, capture: CudaCapture) -> None:
        """The driver ended ``capture``: no stream takes part in it any more. Idempotent."""
        capture.end()
        with self._lock:
            self._captures.discard(capture.streams[0])

    def stream_end_capture(self, stream: CudaStream) -> CudaGraph:
        graph = _capture_of(stream).graph
        err, _ = self._end(stream)
        if err:
            graph.pending = []
            reason = error("cuStreamEndCapture", err)
            raise CaptureError(f"the CUDA driver refused the capture: {reason} (work that another library "
                               f"issued on a captured stream can cause this)", api="cuStreamEndCapture")
        self._settle(graph)
        return graph

    def stream_abort_capture(self, stream: CudaStream) -> None:
        if stream.capture is None:
            return
        into = stream.capture.into
        stream.capture.graph.pending = []  # the nodes they describe are discarded
        err, handle = self._end(stream)
        if not err and handle is not None and not into:
            call(cu.cuGraphDestroy, handle)

    def stream_is_capturing(self, stream: CudaStream) -> bool:
        return stream.capture is not None

    def stream_capture_dependencies(self, stream: CudaStream) -> list[Any]:
        info = self._capture_info(stream)
        return list(info[3])[:info[5]]

    def stream_set_capture_dependencies(self, stream: CudaStream, deps: Sequence[Any]) -> None:
        call(cu.cuStreamUpdateCaptureDependencies, stream.handle, list(deps), None, len(deps),
             cu.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES)

    # Graphs

    def graph_create(self, index: int) -> CudaGraph:
        self.contexts.use(index)
        return CudaGraph(call(cu.cuGraphCreate, 0), index)

    def graph_destroy(self, graph: CudaGraph) -> None:
        self._release(self._in_context, graph.index, cu.cuGraphDestroy, graph.handle)

    def graph_add_node(self, graph: CudaGraph, params: Any, deps: Sequence[Any]) -> Any:
        # The front end keeps the node's record; only a child graph's copy and host keys are kept here.
        self.contexts.use(graph.index)
        if graph.before is None and params.kind is not NodeKind.GRAPH:  # (the hot path of explicit building)
            return add_node(self, graph, params, list(deps))
        with graph.lock:  # the node and what is kept of it appear together to a pairing on another thread
            node = add_node(self, graph, params, list(deps))
            if params.kind is NodeKind.GRAPH:
                self._keep_records(graph, node, params)
            elif graph.before is not None:  # a capture records into the graph: its pairing must leave this be
                graph.before.add(node)
        return node

    def _keep_records(self, graph: CudaGraph, node: Any, params: Any) -> None:
        """Keep the record of a node gpugraph made in a capture's graph without a captured call (the front end
        reads it from here); for a child graph, keep the copy the driver embedded, with the records of the
        child's nodes kept here (paired in creation order, which a copy keeps)."""
        if params.kind is not NodeKind.GRAPH:
            graph.params[node] = params
            return
        graph.children[node] = self._embedded(params.graph, call(cu.cuGraphChildGraphNodeGetGraph, node))

    def _embedded(self, source: CudaGraph, handle: Any) -> CudaGraph:
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
                embedded.children[copy] = self._embedded(source.children[original],
                                                         call(cu.cuGraphChildGraphNodeGetGraph, copy))
        return embedded

    def graph_add_alloc(self, graph: CudaGraph, nbytes: int, deps: Sequence[Any]) -> tuple[Any, int, Allocation]:
        self.contexts.use(graph.index)
        p = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
        p.poolProps.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        p.poolProps.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        p.poolProps.location.id = graph.index
        p.bytesize = max(nbytes, 1)
        with graph.lock:  # the node and its records appear together to a pairing on another thread
            node = _allocate(nbytes, "graph", cu.cuGraphAddMemAllocNode, graph.handle, list(deps), len(deps), p)
            ptr = int(p.dptr)  # the driver may give it the address of an allocation freed before it
            alloc = Allocation(ptr, nbytes, "graph", graph.index)
            graph.memory[node] = alloc
            graph.params[node] = AllocParams(nbytes, ptr)
        return node, ptr, alloc

    def graph_add_free(self, graph: CudaGraph, alloc: Allocation, deps: Sequence[Any]) -> Any:
        self.contexts.use(graph.index)
        params = FreeParams(alloc.ptr)
        with graph.lock:
            node = add_node(self, graph, params, list(deps))
            graph.params[node] = params
            graph.memory[node] = alloc
        return node

    def node_allocation(self, graph: CudaGraph, node: Any) -> Allocation | None:
        if graph.pending:
            self._settle(graph)
        return graph.memory.get(node)

    def graph_destroy_node(self, graph: CudaGraph, node: Any) -> None:
        graph.params.pop(node, None)
        graph.memory.pop(node, None)
        graph.foreign.discard(node)
        graph.children.pop(node, None)
        graph.host_keys.pop(node, None)
        if graph.before is not None:
            graph.before.discard(node)
        call(cu.cuGraphDestroyNode, node)

    def graph_add_dependency(self, graph: CudaGraph, src: Any, dst: Any) -> None:
        call(cu.cuGraphAddDependencies, graph.handle, [src], [dst], None, 1)

    def graph_remove_dependency(self, graph: CudaGraph, src: Any, dst: Any) -> None:
        call(cu.cuGraphRemoveDependencies, graph.handle, [src], [dst], None, 1)

    def graph_nodes(self, graph: CudaGraph) -> list[Any]:
        return listed(cu.cuGraphGetNodes, graph.handle)

    def graph_edges(self, graph: CudaGraph) -> list[tuple[Any, Any]]:
        count = call(cu.cuGraphGetEdges, graph.handle, 0)[-1]
        if not count:
            return []
        sources, targets, _, count = call(cu.cuGraphGetEdges, graph.handle, count)
        return list(zip(list(sources)[:count], list(targets)[:count]))

    def node_params(self, graph: CudaGraph, node: Any) -> Any:
        params = graph.params.get(node)
        if params is not None:
            return params
        if graph.pending:
            self._settle(graph)
            return self.node_params(graph, node)
        child = graph.children.get(node)
        return ChildGraphParams(child) if child is not None else derive_params(self, graph, node)

    def graph_clone(self, graph: CudaGraph) -> CudaGraph:
        self.contexts.use(graph.index)
        self._settle(graph)
        return self._embedded(graph, call(cu.cuGraphClone, graph.handle))

    def graph_instantiate(self, graph: CudaGraph, auto_free_on_launch: bool) -> CudaExec:
        self.contexts.use(graph.index)
        flags = (cu.CUgraphInstantiate_flags.CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH if auto_free_on_launch
                 else 0)
        handle = call(cu.cuGraphInstantiate, graph.handle, int(flags))
        allocated, freed = self._memory_nodes(graph)
        host_keys: list[int] = []
        self._host_keys(graph, host_keys)
        return CudaExec(handle, graph.index, host_keys, GraphMemoryRules.of(allocated, freed, auto_free_on_launch),
                        graph)

    def _memory_nodes(self, graph: CudaGraph) -> tuple[list[Allocation], list[Allocation]]:
        """A graph's allocations and frees (child graphs cannot hold any), from the allocation records of
        the memory nodes gpugraph made: by node, as addresses repeat once the driver reuses them."""
        self._settle(graph)
        allocated: list[Allocation] = []
        freed: list[Allocation] = []
        for node, alloc in graph.memory.items():
            (allocated if isinstance(graph.params[node], AllocParams) else freed).append(alloc)
        return allocated, freed

    def exec_launch(self, exec_: CudaExec, stream: CudaStream) -> None:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.launch")
        if stream.capture is not None:  # the driver refuses cuGraphLaunch into a capture: embed a child
            self.contexts.use(stream.index)
            if exec_.template is None:  # made once, from the graph the front end keeps unchanged and alive
                exec_.template = self.graph_clone(exec_.source)
            self._add_at_frontier(stream, ChildGraphParams(exec_.template))
            return
        memory = exec_.memory
        if memory is not None:
            memory.check()
        if exec_.host_keys and exec_.host_stream is not stream:
            exec_.host_stream = stream
            for key in exec_.host_keys:
                self.host.set_stream(key, stream)
        if memory is None:
            (err,) = cu.cuGraphLaunch(exec_.handle, stream.handle)
            if err:
                if err != _INVALID_CONTEXT:
                    raise error("cuGraphLaunch", err)
                self._retry_in_context(cu.cuGraphLaunch, stream.index, exec_.handle, stream.handle)
            return
        self._launch_with_memory(exec_, stream, memory)

    def _launch_with_memory(self, exec_: CudaExec, stream: CudaStream, memory: Any) -> None:
        """Launch a graph that allocates or frees, and note what it leaves allocated, all or nothing.

        A KeyboardInterrupt that surfaces from the cuGraphLaunch call was raised at the check point just after
        it returned: the driver has the launch (whose result is lost with the interrupt), so the allocations
        are noted all the same; one raised while noting them is followed by noting them again (idempotent).
        """
        try:
            (err,) = cu.cuGraphLaunch(exec_.handle, stream.handle)
        except BaseException:
            memory.commit()
            raise
        if err:
            if err != _INVALID_CONTEXT:
                raise error("cuGraphLaunch", err)
            self._retry_in_context(cu.cuGraphLaunch, stream.index, exec_.handle, stream.handle)
        try:
            memory.commit()
        except BaseException:
            memory.commit()
            raise

    def exec_set_node(self, exec_: CudaExec, node: Any, params: Any) -> None:
        self.contexts.use(exec_.index)
        set_exec_node(self, exec_, node, params)

    def exec_param_patcher(self, exec_: CudaExec, node: Any, params: Any) -> Any:
        self.contexts.use(exec_.index)
        return param_patcher(self, exec_, node, params)

    def exec_set_enabled(self, exec_: CudaExec, node: Any, enabled: bool) -> None:
        self.contexts.use(exec_.index)
        call(cu.cuGraphNodeSetEnabled, exec_.handle, node, int(enabled))

    def exec_update(self, exec_: CudaExec, graph: CudaGraph, originals: list[Any]) -> tuple[str, Any] | None:
        self.contexts.use(exec_.index)
        err, info = cu.cuGraphExecUpdate(exec_.handle, graph.handle)
        if err:
            if err != cu.CUresult.CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
                raise error("cuGraphExecUpdate", err)
            if info is None:  # some cuda-bindings releases return no result info with an error
                return "refused by the CUDA driver", None
            node = info.errorNode if int(info.errorNode) else None
            return _UPDATE_REASONS.get(info.result, f"refused by the CUDA driver ({info.result!r})"), node
        host_keys: list[int] = []
        self._host_keys(graph, host_keys)
        for key in exec_.own_keys.values():  # the update replaced what setters had set
            self.host.forget(key)
        exec_.own_keys.clear()
        exec_.host_keys = host_keys
        exec_.host_stream = None
        template, exec_.source, exec_.template = exec_.template, graph, None
        if template is not None:  # forgotten first: an update made again after an interrupt must not destroy it twice
            self.graph_destroy(template)
        return None

    def _host_keys(self, graph: CudaGraph, keys: list[int]) -> None:
        """Add the registry keys of a graph's host nodes, child graphs included, to ``keys``."""
        self._settle(graph)
        keys.extend(graph.host_keys.values())
        for child in graph.children.values():
            self._host_keys(child, keys)

    def exec_upload(self, exec_: CudaExec, stream: CudaStream) -> None:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.upload")
        self.contexts.use(stream.index)
        call(cu.cuGraphUpload, exec_.handle, stream.handle)

    def exec_destroy(self, exec_: CudaExec) -> None:
        for key in exec_.own_keys.values():
            self._release(self.host.forget, key)
        self._release(self._in_context, exec_.index, cu.cuGraphExecDestroy, exec_.handle)
        if exec_.template is not None:
            self.graph_destroy(exec_.template)


def _done(query: Any, handle: Any) -> bool:
    """A stream or event query: True when its work has finished, False while it is pending."""
    (err,) = query(handle)
    if err == _NOT_READY:
        return False
    if err:
        raise error(query.__name__, err)
    return True


def _allocate(nbytes: int, kind: str, fn: Any, *args: Any) -> Any:
    """An allocating driver call (``call`` otherwise): out of memory is a MemoryError naming the size, as the
    CPU backend raises for what it cannot map."""
    err, result = fn(*args)
    if err == _OUT_OF_MEMORY:
        raise MemoryError(f"cuda: out of memory: cannot allocate {nbytes} bytes of {kind} memory "
                          f"({fn.__name__}: CUDA_ERROR_OUT_OF_MEMORY)")
    if err:
        raise error(fn.__name__, err)
    return result


def _memory_type(ptr: int) -> int | None:
    """The driver's CUmemorytype of the memory at ``ptr`` (in the current context), or None where the driver
    does not know the address (CUDA_ERROR_INVALID_VALUE: pageable host memory, or none at all)."""
    err, kind = cu.cuPointerGetAttribute(_POINTER.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    if err == _INVALID_VALUE:
        return None
    if err:
        raise error("cuPointerGetAttribute", err)
    return int(kind)


def _capture_of(stream: CudaStream) -> CudaCapture:
    """The capture ``stream`` takes part in: for the calls the front end makes only while it captures."""
    capture = stream.capture
    if capture is None:  # a bug in gpugraph, not a user's mistake
        raise GpuGraphError("cuda: a capture call on a stream that is not capturing")
    return capture


def _describes(record: Any, derived: Any) -> bool:
    """Whether a queued record describes a node whose parameters the driver reports as ``derived``."""
    if type(record) is not type(derived):
        return False
    if isinstance(record, KernelParams):
        return record.kernel is derived.kernel and record.grid == derived.grid and record.block == derived.block
    if isinstance(record, MemcpyParams):
        return (address(record.dst), address(record.src), record.nbytes) == (derived.dst, derived.src,
                                                                             derived.nbytes)
    if isinstance(record, MemsetParams):
        return address(record.dst) == derived.dst and record.count == derived.count
    if isinstance(record, AllocParams):  # the driver reports a 0-byte allocation's size as the 1 it allocated
        return record.ptr == derived.ptr
    return record == derived  # free nodes: their addresses


def _check_allocated(*operands: Any) -> None:
    """Refuse a copy touching graph memory that is not allocated: the driver would take its unmapped
    address for host memory and crash the process."""
    for operand in operands:
        if type(operand) is Array and operand._alloc.origin != "device" and not operand._alloc.live:
            raise GpuGraphError(f"{operand!r} was used outside its allocation's lifetime: "
                                f"{operand._alloc.owner} is not allocated now (before its allocation ran, "
                                f"or after its free)")


def _index(*operands: Any) -> int:
    """The device index of the first Array among ``operands`` (host arrays have none)."""
    for operand in operands:
        if type(operand) is Array:
            return operand.device.index
    return 0
