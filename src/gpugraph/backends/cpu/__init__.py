"""The CPU reference backend: HIP/CUDA semantics executed on the host, always available.

Streams are FIFO task queues, each run by its own worker thread; graphs are plain Python DAGs whose
executable form runs independent branches on a thread pool. It applies the same rules as CUDA so that
code tested here behaves the same on a GPU.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _params
from ..._attributes import AttributeLimits, AttributeRefusal, KernelAttributes, launch_refusal
from ..._errors import BackendUnavailableError, raise_stream_errors
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._kernel import MAX_BLOCK, MAX_BLOCK_THREADS, MAX_GRID, SHARED_MEM_LIMIT, LaunchConfig
from ..._nodes import (
    AllocParams,
    ChildGraphParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
    NodeKind,
    WaitValue,
)
from ..._params import resolve
from ..._semaphores import EmulatedSemaphore
from .. import _exit as at_exit
from .._allocation import Allocation
from .._exit import exit_timeout
from .._host_registry import HostRegistry
from ._capture import CpuCapture
from ._collectives import CpuComm, init_all, part_task
from ._executor import CpuExec
from ._graphs import CpuCondition, CpuGraph, CpuNode, CpuUserObject, copied, update_refusal
from ._hub import RemoteClique, unique_id
from ._load import load as load_compiled
from ._memory import ADDRESSES, MACHINE_MEMORY, PinnedRegistry, Pool, check_mappable, guarded, typed_view
from ._ops import map_allocation, run_kernel, run_mem_ops, run_memcpy, run_memset, run_semaphores, unmap_allocation
from ._parallel import POOL_THREADS
from ._streams import BranchPool, CpuEvent, CpuStream

# How many devices the CPU backend offers (cpu:0 .. cpu:N-1), so that programs and tests for several devices run
# without GPUs; $GPUGRAPH_CPU_DEVICES sets another number.
DEVICES = 4
# What the CPU devices allow of kernel node attributes: an H200's figures (priorities 0 to -5, a 128-MiB access
# policy window, clusters and cooperative launches), so that a program's attributes meet the rules they meet there.
_LIMITS = AttributeLimits((0, -5), 128 << 20, True, True)
_MULTIPROCESSORS, _SHARED_PER_SM = 132, 228 << 10
MAX_DEVICES = 64


def configured_devices() -> int:
    """The number of CPU devices: $GPUGRAPH_CPU_DEVICES (1 to MAX_DEVICES), else DEVICES."""
    text = os.environ.get("GPUGRAPH_CPU_DEVICES", "").strip()
    if not text:
        return DEVICES
    count = int(text) if text.isdigit() else 0
    if not 1 <= count <= MAX_DEVICES:
        raise BackendUnavailableError(f"cpu: $GPUGRAPH_CPU_DEVICES must be a whole number from 1 to {MAX_DEVICES}, "
                                      f"got {text!r}")
    return count


def _host_bytes(ptr: int, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes of host memory at ``ptr`` as a writable uint8 array, viewed where they are."""
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr) if nbytes else bytearray()
    # ctypes arrays export the buffer protocol; NumPy's stubs name buffer types one by one before Python 3.12.
    return np.frombuffer(raw, np.uint8)  # type: ignore[arg-type]


class CpuBackend:
    """Implements ``gpugraph.backends._protocol.Backend`` on the host."""

    name = "cpu"
    speaks_cuda = False  # host memory and Python streams: no CUDA protocols
    dlpack_device_type = 1  # kDLCPU: its memory is host memory

    def __init__(self) -> None:
        self._count = configured_devices()
        # Per device, as CUDA keeps them: the graph pool, and the default pool of stream-ordered allocations,
        # which releases all unused memory at a synchronize.
        self._graph_pools = [Pool() for _ in range(self._count)]
        self._stream_pools = [Pool(release_threshold=0) for _ in range(self._count)]
        self._pinned = PinnedRegistry()
        # Host memory page-locked for copies (Device.register_host, graph and captured copies), counted as the CUDA
        # backend counts its driver's registrations: here a registration is its record alone, so releases need no
        # particular place and run at once.
        self.host_registry = HostRegistry(lambda start, nbytes, read_only: None, lambda handle: None,
                                          self._pinned.holds, lambda release: release())
        self._schedules = ["auto"] * self._count  # (Device.set_schedule)
        # Every stream in creation order, destroyed ones included until their work has run and their error
        # (if any) has been reported: a device synchronize waits for them, as CUDA's does.
        self._streams: dict[CpuStream, None] = {}
        self._destroyed = 0  # about how many of them are destroyed (only decides when to prune)
        self._default_streams: list[CpuStream | None] = [None] * self._count  # each device's legacy stream
        self._peers: set[tuple[int, int]] = set()  # (device, peer) pairs whose access enable_peer_access enabled
        self._lock = threading.Lock()
        self._executor: BranchPool | None = None
        atexit.register(self._finish_at_exit)

    def _thread_pool(self) -> BranchPool:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = BranchPool(POOL_THREADS, "gpugraph-cpu-graph")
        return self._executor

    # Devices

    def device_count(self) -> int:
        return self._count

    def device_name(self, index: int) -> str:
        return f"CPU reference device ({os.cpu_count()} cores)"

    def device_properties(self, index: int) -> dict[str, Any]:
        cores = os.cpu_count() or 1
        # What the emulation does: kernels compiled for an sm_80 (gpugraph_cpu.h), blocks of up to 1024 threads run by
        # the machine's cores, copies and kernels of several streams run at once on the streams' threads, kernels use
        # any host memory in place, no grid-wide synchronization; no clocks, registers or PCI location of its own (0).
        return {"name": self.device_name(index), "totalGlobalMem": MACHINE_MEMORY or 0,
                "sharedMemPerBlock": SHARED_MEM_LIMIT, "sharedMemPerMultiprocessor": SHARED_MEM_LIMIT,
                "regsPerBlock": 0, "regsPerMultiprocessor": 0, "warpSize": 32, "maxThreadsPerBlock": MAX_BLOCK_THREADS,
                "maxThreadsDim": MAX_BLOCK, "maxGridSize": MAX_GRID, "maxThreadsPerMultiProcessor": MAX_BLOCK_THREADS,
                "multiProcessorCount": cores, "clockRate": 0,
                "memoryClockRate": 0, "memoryBusWidth": 0, "l2CacheSize": 0, "totalConstMem": 64 * 1024, "major": 8,
                "minor": 0, "asyncEngineCount": 2, "concurrentKernels": 1, "canMapHostMemory": 1,
                "unifiedAddressing": 1, "pageableMemoryAccess": 1, "managedMemory": 1, "cooperativeLaunch": 0,
                "streamPrioritiesSupported": 1, "memoryPoolsSupported": 1, "integrated": 1, "pciBusID": 0,
                "pciDeviceID": 0, "pciDomainID": 0}

    def device_schedule(self, index: int) -> str:
        return self._schedules[index]

    def set_device_schedule(self, index: int, schedule: str) -> None:
        self._schedules[index] = schedule  # (kept for reading back: a synchronize here always blocks its thread)

    def device_can_access_peer(self, index: int, peer: int) -> bool:
        return True  # (all host memory: the rule that access be enabled first is kept all the same)

    def peer_access(self, index: int, peer: int) -> bool:
        return (index, peer) in self._peers

    def enable_peer_access(self, index: int, peer: int) -> None:
        with self._lock:
            self._peers.add((index, peer))

    def pool_access(self, index: int) -> tuple[int, ...]:
        """The other devices that device ``index``'s memory pool lets use its allocations, as CUDA's pool:
        those enable_peer_access enabled for it."""
        # A copy first (one C call, whole under the GIL): enable_peer_access may add to the set meanwhile, and
        # the backend's lock may be held by this very thread here (a captured allocation).
        return tuple(sorted(device for device, peer in frozenset(self._peers) if peer == index))

    def device_synchronize(self, index: int) -> None:
        errors = []
        for stream in list(self._streams):
            if stream.index != index:
                continue
            stream.wait_idle()
            error = stream.take_error()
            if error is not None:
                errors.append(error)
            if stream.exited:  # destroyed, its work done and its error taken: forgotten
                self._streams.pop(stream, None)
        self._stream_pools[index].release()
        raise_stream_errors(errors)

    def _finish_at_exit(self) -> None:
        """At interpreter exit: let queued work finish, waiting at most $GPUGRAPH_EXIT_TIMEOUT seconds in
        all, then say on stderr what did not finish and which errors no synchronize reported."""
        timeout = exit_timeout()
        deadline = time.monotonic() + timeout
        streams = list(self._streams)
        unfinished = sum(not s.wait_idle(max(0.0, deadline - time.monotonic())) for s in streams)
        if unfinished:
            at_exit.unfinished(f"{unfinished} CPU stream{'s' if unfinished > 1 else ''}", timeout)
        for stream in streams:
            error = stream.take_error()
            if error is not None:
                at_exit.never_reported("a CPU stream", error)

    # Memory

    def mem_alloc(self, index: int, nbytes: int) -> tuple[int, Allocation]:
        if HOST_THREADS:
            refuse_in_host_function("a device allocation (Device.empty, Device.zeros, Device.asarray)")
        check_mappable(nbytes, "device")
        buffer = guarded(nbytes, "device")  # (an access past its end stops the kernel: an illegal address)
        alloc = Allocation(buffer.ctypes.data, nbytes, "device", index, buffer=buffer)
        return alloc.ptr, alloc

    def mem_free(self, alloc: Allocation) -> None:
        alloc.buffer = None

    def pinned_empty(self, index: int, nbytes: int) -> np.ndarray:
        if HOST_THREADS:
            refuse_in_host_function("Device.pinned")
        check_mappable(nbytes, "page-locked host")
        buffer = guarded(nbytes, "page-locked host")  # (never empty: each buffer has an address of its own)
        self._pinned.add(buffer)
        return buffer[:nbytes]

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        run_memcpy(dst, src, nbytes)

    def data_address(self, array: Any) -> int:
        return self.export_memory(array)[0]

    def export_memory(self, array: Any) -> tuple[int, Any]:
        # Stream-ordered and graph allocations live at fixed addresses no host code can read: export the
        # memory mapped to them now, and keep it for the export, so that a view read after the free reads
        # released memory (whose contents are undefined, as on a GPU) instead of unmapped memory.
        view = typed_view(array)
        return view.ctypes.data, view

    def mem_import(self, index: int, ptr: int, nbytes: int) -> Allocation:
        # Host memory another library exported (DLPack kDLCPU), viewed where it is; its owner keeps it alive.
        return Allocation(ptr, nbytes, "device", index, owner=f"imported memory at {ptr:#x}",
                          buffer=_host_bytes(ptr, nbytes))

    def mem_host_mapped(self, index: int, array: np.ndarray, keep: Any) -> Allocation:
        ptr = array.__array_interface__["data"][0]  # (kernels here reach host memory where it is)
        alloc = Allocation(ptr, array.nbytes, "device", index, owner=f"page-locked host memory at {ptr:#x}",
                           buffer=array.reshape(-1).view(np.uint8))
        alloc.keep = keep
        return alloc

    def graph_memory(self, index: int) -> dict[str, int]:
        return self._graph_pools[index].usage()

    def graph_memory_trim(self, index: int) -> None:
        self._graph_pools[index].trim()

    def graph_memory_reset_high(self, index: int) -> None:
        self._graph_pools[index].reset_high()

    def _new_allocation(self, index: int, nbytes: int, pool: Pool, origin: str, ptr: int | None = None) -> Allocation:
        """An allocation at ``ptr`` (a freed graph allocation's, which CUDA reuses), else at a new address."""
        check_mappable(nbytes, f"{origin}-ordered" if origin == "stream" else origin)
        if ptr is None:
            ptr = ADDRESSES.reserve(nbytes)
        alloc = Allocation(ptr, nbytes, origin, index, pool=pool)
        ADDRESSES.register(alloc)
        return alloc

    # Kernels

    def kernel_load(self, index: int, kernel: Any) -> Any:
        if kernel.cpu is None:  # compiled from its source (raising KernelCompileError here, at the call)
            load_compiled(kernel, index)
        return kernel

    def kernel_variable(self, index: int, kernel: Any, name: str) -> Allocation | None:
        found = load_compiled(kernel, index).module.variable(name)
        if found is None:
            return None
        # (The device's instance of the library stays loaded while the process runs: its variable is memory like any
        # other, of this device alone.)
        address, size = found
        return Allocation(address, size, "device", index, owner=f"the module variable {name!r} of {kernel!r}",
                          buffer=_host_bytes(address, size))

    def kernel_static_shared(self, index: int, kernel: Any) -> int:
        return 0 if kernel.cpu is not None else load_compiled(kernel, index).static_shared

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

    def stream_launcher(self, stream: CpuStream, device: Any) -> None:
        return None  # (no compiled path: every launch takes stream_launch)

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
        stream.submit(run_kernel, (function, LaunchConfig(grid, block, shared_mem), function.typed_args(args),
                                   stream.index))

    def stream_memcpy(self, stream: CpuStream, dst: Any, src: Any, nbytes: int, capture: CpuCapture | None,
                      box: Any = None, pins: tuple = ()) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memcpy")
        if capture is not None and capture.record(stream, MemcpyParams(dst, src, nbytes, box, pins)):
            return
        stream.submit(run_memcpy, (dst, src, nbytes, box))

    def stream_memset(self, stream: CpuStream, dst: Any, value: Any, pattern: int, element_size: int,
                      count: int, capture: CpuCapture | None, plane: tuple[int, int, int] | None = None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.memset")
        shape = plane or (0, 1, 0)  # (pitch, rows, offset)
        if capture is not None and capture.record(stream, MemsetParams(dst, value, pattern, element_size, count,
                                                                       *shape)):
            return
        stream.submit(run_memset, (dst, pattern, element_size, count, *shape))

    def stream_host(self, stream: CpuStream, fn: Any, args: tuple, capture: CpuCapture | None) -> None:
        if HOST_THREADS:
            refuse_in_host_function("Stream.host")
        if capture is not None and capture.record(stream, HostParams(fn, args)):
            return
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

    # Communicators (emulated: _collectives)

    def comm_init_all(self, indices: list[int], timeout: float | None) -> list[CpuComm]:
        return init_all(indices, timeout)

    def comm_unique_id(self) -> bytes:
        return unique_id()

    def comm_init_rank(self, index: int, rank: int, size: int, unique_id: bytes, timeout: float | None) -> CpuComm:
        return CpuComm(RemoteClique(unique_id, rank, size, timeout), rank, index)

    def comm_enqueue(self, comm: CpuComm, kind: str, send: Any, recv: Any, count: int, dtype: Any, op: str | None,
                     root: int, stream: CpuStream, capture: CpuCapture | None) -> None:
        fn, args = part_task(comm, kind, send, recv, count, dtype, op, root)
        self.stream_host(stream, fn, args, capture)

    def comm_abort(self, comm: CpuComm) -> None:
        comm.clique.abort(f"rank {comm.rank} called abort")

    def comm_aborted(self, comm: CpuComm) -> bool:
        return comm.clique.aborted is not None

    def comm_destroy(self, comm: CpuComm) -> None:
        if isinstance(comm.clique, RemoteClique):
            comm.clique.close()  # (an in-process clique goes with its last rank's parts: nothing to free)

    def comm_group_start(self) -> None:
        pass  # each part is a task on its rank's stream worker: none waits in the call that enqueues it

    def comm_group_end(self) -> None:
        pass

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

    # Graphs

    # User objects

    def user_object_create(self, destroy: Any, count: int) -> CpuUserObject:
        return CpuUserObject(destroy, count)

    def user_object_retain(self, obj: CpuUserObject, count: int) -> None:
        obj.retain(count)

    def user_object_release(self, obj: CpuUserObject, count: int, collected: bool) -> None:
        obj.release(count)

    def graph_retain_user_object(self, graph: CpuGraph, obj: CpuUserObject, count: int, move: bool) -> None:
        if not move:
            obj.retain(count)
        graph.hold(obj, count)

    def graph_release_user_object(self, graph: CpuGraph, obj: CpuUserObject, count: int) -> None:
        graph.let_go(obj, count)

    def graph_create(self, index: int) -> CpuGraph:
        return CpuGraph(index)

    def graph_destroy(self, graph: CpuGraph) -> None:
        pass

    def graph_add_node(self, graph: CpuGraph, params: Any, deps: Sequence[CpuNode]) -> CpuNode:
        return graph.add(params, deps)

    def graph_condition(self, graph: CpuGraph, default: int, reset: bool) -> tuple[CpuCondition, int]:
        condition = CpuCondition(default, reset)
        return condition, condition.handle

    def graph_add_alloc(self, graph: CpuGraph, nbytes: int, deps: Sequence[CpuNode], index: int,
                        access: tuple[int, ...]) -> tuple[CpuNode, int, Any]:
        alloc = self._new_allocation(index, nbytes, self._graph_pools[index], "graph",
                                     graph.reusable_address(nbytes, deps, index))
        alloc.access = access
        node = graph.add(AllocParams(nbytes, alloc.ptr, index, access), deps, alloc)
        return node, alloc.ptr, alloc

    def graph_add_free(self, graph: CpuGraph, alloc: Allocation, deps: Sequence[CpuNode]) -> CpuNode:
        return graph.add(FreeParams(alloc.ptr), deps, alloc)

    def node_allocation(self, graph: CpuGraph, node: CpuNode) -> Allocation | None:
        return node.alloc

    def graph_destroy_node(self, graph: CpuGraph, node: CpuNode) -> None:
        for dep in node.deps:
            dep.dependents.remove(node)
        for dependent in node.dependents:
            dependent.deps.remove(node)
            dependent.kinds.pop(node, None)
        graph.nodes.remove(node)

    def graph_set_node(self, graph: CpuGraph, node: CpuNode, params: Any) -> None:
        node.params = copied(params)  # (an executable graph runs a copy of the graph: CpuExec.template)

    def graph_add_dependency(self, graph: CpuGraph, src: CpuNode, dst: CpuNode, kind: str) -> None:
        dst.deps.append(src)
        src.dependents.append(dst)
        if kind != "full":
            dst.kinds[src] = kind

    def graph_dependency_kind(self, graph: CpuGraph, src: CpuNode, dst: CpuNode) -> str:
        return dst.kinds.get(src, "full")

    def graph_remove_dependency(self, graph: CpuGraph, src: CpuNode, dst: CpuNode) -> None:
        dst.deps.remove(src)
        src.dependents.remove(dst)
        dst.kinds.pop(src, None)

    def graph_nodes(self, graph: CpuGraph) -> list[CpuNode]:
        return list(graph.nodes)

    def graph_edges(self, graph: CpuGraph) -> list[tuple[CpuNode, CpuNode]]:
        return graph.edges()

    def graph_dependencies(self, graph: CpuGraph, nodes: list[CpuNode]) -> None:
        return None  # (no compiled lane: the front end reads graph_edges)

    def graph_has_shape(self, graph: CpuGraph, count: int, shape: tuple[Any, ...]) -> None:
        return None  # (no compiled lane: the front end reads graph_edges)

    def node_params(self, graph: CpuGraph, node: CpuNode) -> Any:
        return node.params

    def graph_debug_dot(self, graph: CpuGraph, path: str, flags: tuple[str, ...]) -> bool:
        return False  # (no driver: the front end writes gpugraph's DOT)

    def graph_clone(self, graph: CpuGraph) -> CpuGraph:
        return graph.clone()

    def graph_id(self, graph: CpuGraph) -> int:
        return graph.id

    def node_ids(self, graph: CpuGraph, node: CpuNode) -> tuple[int, int]:
        return node.local_id, graph.id << 32 | node.local_id  # (the tools id: this backend's own, unique too)

    def exec_id(self, exe: CpuExec) -> int:
        return exe.id

    def graph_instantiate(self, graph: CpuGraph, flags: frozenset[str]) -> CpuExec:
        # (use_node_priority: the CPU backend runs ready nodes as its threads take them, a preference CUDA may not
        # follow either, but an update keeps the priorities; device_launch: a kernel may launch it, see
        # _executor.CpuExec)
        return CpuExec(graph, "auto_free_on_launch" in flags, "use_node_priority" in flags, self._thread_pool,
                       "device_launch" in flags)

    def exec_device_handle(self, exe: CpuExec) -> int:
        return exe.id  # (the number the CPU header's cudaGraphLaunch is given for it)

    # Kernel node attributes: kept by the nodes; a kernel's attributes change nothing of what it computes here

    def kernel_attribute_limits(self, index: int) -> AttributeLimits:
        return _LIMITS

    def kernel_cooperative_blocks(self, index: int, kernel: Any, threads: int, shared_mem: int) -> int:
        # The CPU device's model of residency: an H200's 132 multiprocessors of 2048 threads, 32 blocks and 228 KiB
        # of shared memory each, so that a program meets the limit it meets there, whatever the host.
        per_sm = min(32, 2048 // threads, _SHARED_PER_SM // shared_mem if shared_mem else 32)
        return per_sm * _MULTIPROCESSORS

    def node_attributes(self, graph: CpuGraph, node: CpuNode) -> KernelAttributes:
        return node.attributes

    def node_set_attributes(self, graph: CpuGraph, node: CpuNode, attributes: KernelAttributes) -> None:
        node.attributes = attributes

    def node_copy_attributes(self, graph: CpuGraph, node: CpuNode, src_graph: CpuGraph, src: CpuNode) -> None:
        node.attributes = src.attributes

    def graph_builder(self, graph: CpuGraph, device: Any) -> None:
        return None  # (no compiled path: every node takes graph_add_node)

    def exec_fast_lanes(self, exec_: CpuExec, device: Any) -> None:
        return None  # (no compiled path: every launch and setter takes the Python path)

    def exec_launch(self, exec_: CpuExec, stream: CpuStream, capture: CpuCapture | None) -> bool:
        if HOST_THREADS:
            refuse_in_host_function("GraphExec.launch")
        # Launching a graph into a capture embeds it as a child graph.
        if capture is not None and capture.record(stream, ChildGraphParams(exec_.template)):
            return True
        exec_.launch(stream)
        return False

    def exec_set_node(self, exec_: CpuExec, node: CpuNode, params: Any) -> None:
        if params.kind is NodeKind.KERNEL:  # (the attributes the exec's node has: the driver checks them on CUDA)
            block = params.block
            refusal = launch_refusal(exec_.template.clone_of[node].attributes, params.grid, block,
                                     lambda: self.kernel_cooperative_blocks(params.device, params.kernel,
                                                                            block[0] * block[1] * block[2],
                                                                            params.shared_mem))
            if refusal is not None:
                raise AttributeRefusal(refusal)
        exec_.set_node(node, params)

    def exec_param_patcher(self, exec_: CpuExec, node: CpuNode, params: Any) -> Any:
        return lambda: exec_.set_node(node, params)  # the node's step is compiled again with the new values

    def exec_set_enabled(self, exec_: CpuExec, node: CpuNode, enabled: bool) -> None:
        exec_.set_enabled(node, enabled)

    def exec_update(self, exec_: CpuExec, graph: CpuGraph, originals: list[CpuNode]) -> tuple[str, CpuNode] | None:
        refused = update_refusal([exec_.template.clone_of[node] for node in originals], graph.nodes,
                                 exec_.node_priority)
        if refused is None:
            exec_.update(graph, originals)
            exec_.template.replace_references(graph)  # the new graph's references replace the old (as on CUDA)
        return refused

    def exec_upload(self, exec_: CpuExec, stream: CpuStream) -> None:
        refuse_in_host_function("GraphExec.upload")
        if exec_.uploaded is not None:  # (instantiated with device_launch: kernels launch what is uploaded)
            self.exec_upload_for_kernels(exec_)

    def exec_upload_for_kernels(self, exec_: CpuExec) -> None:
        done = exec_.last_done
        if done is not None:  # CUDA's upload comes after the launches made before it, their tail launches included
            done.wait()
        exec_.upload()

    def exec_destroy(self, exec_: CpuExec) -> None:
        exec_.forget()


def create_backend() -> CpuBackend:
    """The CPU backend; it needs nothing beyond NumPy, so it is always available."""
    return CpuBackend()
