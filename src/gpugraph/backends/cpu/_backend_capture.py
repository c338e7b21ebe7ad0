"""CpuCapturing: the CPU backend's streams, events and capture, the work enqueued on streams (or recorded into a
capture: see ``_capture.CpuCapture``) and external semaphores; on CpuRuntime.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from ... import _params
from ..._attributes import KernelAttributes
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._kernel import LaunchConfig
from ..._nodes import AllocParams, FreeParams, HostParams, KernelParams, MemcpyParams, MemsetParams, NodeKind, WaitValue
from ..._params import resolve
from ..._semaphores import EmulatedSemaphore
from .._allocation import Allocation
from ._backend_runtime import CpuRuntime
from ._capture import CpuCapture
from ._graphs import CpuGraph, CpuNode
from ._ops import map_allocation, run_kernel, run_mem_ops, run_memcpy, run_memset, run_semaphores, unmap_allocation
from ._streams import CpuEvent, CpuStream
from ._timeline import RECORDING, timed_op


class CpuCapturing(CpuRuntime):
    """Streams, events and capture: the middle layer of CpuBackend."""

    # Streams and events

    def stream_create(self, index: int, non_blocking: bool, priority: int) -> CpuStream:
        stream = CpuStream(index, non_blocking, priority)
        if not non_blocking:
            stream.implicit_order = self._implicit_order
        if self._destroyed > 16 + len(self._streams) // 2:  # pruned now and then: creation stays O(1)
            self._forget_destroyed()
        self._streams[stream] = None
        return stream

    def stream_default(self, index: int) -> CpuStream:
        stream = self._default_streams[index]
        if stream is None:
            stream = self._default_streams[index] = self.stream_create(index, False, 0)
        return stream

    def _implicit_order(self, stream: CpuStream) -> None:
        """CUDA's legacy default stream: its work waits for the earlier work of every blocking stream of its
        device, and a blocking stream's work waits for its device's legacy stream's earlier work."""
        legacy = self._default_streams[stream.index]
        if stream is legacy:
            earlier = [s for s in list(self._streams)
                       if s is not legacy and s.index == stream.index and not s.non_blocking and not s.query()]
        else:
            earlier = [legacy] if legacy is not None and not legacy.query() else []
        for other in earlier:
            reached = threading.Event()
            other.put(reached.set, ())
            stream.put(reached.wait, ())

    def stream_address(self, stream: CpuStream) -> int:
        return id(stream)

    def stream_destroy(self, stream: CpuStream) -> None:
        stream.close()  # its work still runs; it stays listed for device synchronizes until reported
        self._destroyed += 1

    def _forget_destroyed(self) -> None:
        """Drop destroyed streams whose work has run and that have no error left to report."""
        for stream in [s for s in list(self._streams) if s.exited and s.error is None]:
            self._streams.pop(stream, None)
        self._destroyed = sum(s.closed for s in list(self._streams))

    def stream_synchronize(self, stream: CpuStream) -> None:
        refuse_in_host_function("Stream.synchronize")
        try:
            stream.synchronize()
        finally:
            self._stream_pools[stream.index].release()  # as CUDA's pool does at a synchronize, above its threshold

    def stream_query(self, stream: CpuStream) -> bool:
        return stream.query()

    def stream_launch(self, stream: CpuStream, function: Any, grid: tuple, block: tuple,
                      shared_mem: int, args: tuple, capture: CpuCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.launch")
        if capture is not None:
            # (A kernel captured on a stream of priority p has priority p, as CUDA's do; the stream's priority is
            # within the device's range already, where Stream clamped it.)
            priority = stream.priority
            attributes = KernelAttributes(priority=priority) if priority else None
            if capture.record(stream, KernelParams(function, grid, block, shared_mem, args, stream.index),
                              attributes=attributes):
                return
            if _params.in_use:  # ended meanwhile (on another thread): run uncaptured, the Params' values now
                args = tuple([resolve(a) for a in args])
        task = (function, LaunchConfig(grid, block, shared_mem), function.typed_args(args), stream.index)
        if RECORDING:  # (one test while no timeline records: the stream operations below do the same)
            stream.submit(*timed_op(stream.index, NodeKind.KERNEL, function, run_kernel, task))
        else:
            stream.submit(run_kernel, task)

    def stream_memcpy(self, stream: CpuStream, dst: Any, src: Any, nbytes: int, capture: CpuCapture | None,
                      box: Any = None, pins: tuple = ()) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memcpy")
        if capture is not None and capture.record(stream, MemcpyParams(dst, src, nbytes, box, pins)):
            return
        if RECORDING:
            stream.submit(*timed_op(stream.index, NodeKind.MEMCPY, nbytes, run_memcpy, (dst, src, nbytes, box)))
        else:
            stream.submit(run_memcpy, (dst, src, nbytes, box))

    def stream_memset(self, stream: CpuStream, dst: Any, value: Any, pattern: int, element_size: int,
                      count: int, capture: CpuCapture | None, plane: tuple[int, int, int] | None = None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memset")
        shape = plane or (0, 1, 0)  # (pitch, rows, offset)
        if capture is not None and capture.record(stream, MemsetParams(dst, value, pattern, element_size, count,
                                                                       *shape)):
            return
        task = (dst, pattern, element_size, count, *shape)
        if RECORDING:
            stream.submit(*timed_op(stream.index, NodeKind.MEMSET, count * element_size * shape[1], run_memset, task))
        else:
            stream.submit(run_memset, task)

    def stream_host(self, stream: CpuStream, fn: Any, args: tuple, capture: CpuCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.host")
        if capture is not None and capture.record(stream, HostParams(fn, args)):
            return
        if RECORDING:
            stream.submit(*timed_op(stream.index, NodeKind.HOST, fn, fn, args))
        else:
            stream.submit(fn, args)

    def stream_mem_ops(self, stream: CpuStream, params: Any, capture: CpuCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.wait_value" if isinstance(params.ops[0], WaitValue) else
                                    "Stream.write_value")
        if capture is not None and capture.record(stream, params):
            return
        stream.submit(run_mem_ops, (params,))

    def stream_semaphores(self, stream: CpuStream, params: Any, capture: CpuCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function(f"Stream.{'signal' if params.kind is NodeKind.SEMAPHORE_SIGNAL else 'wait'}"
                                    f"_semaphores")
        if capture is not None and capture.record(stream, params):
            return
        stream.submit(run_semaphores, (params,))

    def stream_alloc(self, stream: CpuStream, nbytes: int, capture: CpuCapture | None) -> tuple[int, Allocation]:
        if HOST_THREADS:
            refuse_in_host_function("Stream.alloc")
        if capture is not None:  # becomes an allocation node, drawing on the graph pool
            with capture.lock:
                if capture.active:  # (else ended meanwhile, on another thread: allocated as uncaptured)
                    ptr = capture.graph.reusable_address(nbytes, capture.frontiers[stream], stream.index)
                    alloc = self._new_allocation(stream.index, nbytes, self._graph_pools[stream.index], "graph", ptr)
                    # As CUDA's node does: the access its device's pool gives then (enable_peer_access).
                    alloc.access = self.pool_access(stream.index)
                    capture.record(stream, AllocParams(nbytes, alloc.ptr, stream.index, alloc.access), alloc)
                    return alloc.ptr, alloc
        alloc = self._new_allocation(stream.index, nbytes, self._stream_pools[stream.index], "stream")
        alloc.live = True
        stream.submit(map_allocation, (alloc,))
        return alloc.ptr, alloc

    def stream_free(self, stream: CpuStream, alloc: Allocation, capture: CpuCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.free")
        # A free node; the front end checked that it frees graph memory once.
        if capture is not None and capture.record(stream, FreeParams(alloc.ptr), alloc):
            return True
        stream.submit(unmap_allocation, (alloc,))
        return False

    def stream_wait_event(self, stream: CpuStream, event: CpuEvent, capture: CpuCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.wait")
        if capture is not None:
            return capture.fork_or_join(stream, event.capture_nodes)
        stream.wait(event)
        return True

    # External semaphores (emulated: another API's semaphore is an EmulatedSemaphore here)

    def semaphore_import(self, index: int, handle: Any, timeline: bool) -> EmulatedSemaphore:
        if not isinstance(handle, EmulatedSemaphore):
            raise TypeError(f"import_semaphore: the CPU backend imports a gg.EmulatedSemaphore (it has no other API's "
                            f"semaphores to import), got {type(handle).__name__}")
        if handle.timeline is not timeline:
            raise ValueError(f"import_semaphore: {handle!r} is {'a timeline' if handle.timeline else 'a binary'} "
                             f"semaphore, imported with timeline={timeline}")
        return handle

    def semaphore_destroy(self, semaphore: EmulatedSemaphore) -> None:
        pass  # (the emulated semaphore is its owner's)

    # Capture

    def thread_capture_mode(self, mode: str) -> None:
        pass  # (no driver: the front end's rules are all there is)

    def capture_id(self, capture: CpuCapture) -> int:
        return capture.id

    def capture_create(self, stream: CpuStream, mode: str, graph: CpuGraph | None) -> CpuCapture:
        return CpuCapture(CpuGraph(stream.index) if graph is None else graph, stream)

    def capture_begin(self, capture: CpuCapture, deps: Sequence[CpuNode]) -> CpuGraph:
        capture.begin(list(deps))
        return capture.graph

    def capture_end(self, capture: CpuCapture) -> CpuGraph:
        return capture.end()

    def capture_abort(self, capture: CpuCapture) -> None:
        capture.end()

    def capture_active(self, capture: CpuCapture) -> bool:
        return capture.active

    def capture_dependencies(self, capture: CpuCapture, stream: CpuStream) -> list[CpuNode]:
        return list(capture.frontiers[stream])

    def capture_dependency_kinds(self, capture: CpuCapture, stream: CpuStream) -> list[str]:
        return list(capture.kinds.get(stream) or ["full"] * len(capture.frontiers[stream]))

    def capture_set_dependencies(self, capture: CpuCapture, stream: CpuStream, deps: Sequence[CpuNode],
                                 kinds: Sequence[str] | None = None) -> None:
        capture.set_frontier(stream, list(deps), None if kinds is None else list(kinds))

    def event_create(self, index: int, timing: bool) -> CpuEvent:
        return CpuEvent(timing)

    def event_destroy(self, event: CpuEvent) -> None:
        pass

    def event_record(self, event: CpuEvent, stream: CpuStream, capture: CpuCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("Stream.record")
        if capture is not None:  # a captured event: it stands for the stream's frontier
            with capture.lock:
                if capture.active:  # (else ended meanwhile, on another thread: recorded as uncaptured)
                    event.capture_nodes = list(capture.frontiers[stream])
                    return True
        stream.record(event)
        return False

    def event_synchronize(self, event: CpuEvent) -> None:
        refuse_in_host_function("Event.synchronize")
        if event.latest is not None:
            event.latest.flag.wait()
        for pool in self._stream_pools:  # (an event does not say its device: every pool, as cheap as one)
            pool.release()

    def event_query(self, event: CpuEvent) -> bool:
        return event.latest is None or event.latest.flag.is_set()

    def event_elapsed_ms(self, start: CpuEvent, end: CpuEvent) -> float:
        if start.latest is None or end.latest is None:
            raise ValueError("elapsed_ms: both events must have been recorded")
        return (end.latest.time - start.latest.time) * 1e3
