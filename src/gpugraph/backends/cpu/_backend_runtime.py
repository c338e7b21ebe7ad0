"""CpuRuntime: the CPU backend's state (per device: the pools, the streams, the schedule; the peers enabled, the
pinned-host registry, the pool of graph branches), its devices and their properties, memory and kernels. The
layers above build on it: streams, events and capture (``_backend_capture``), graphs and executable graphs
(``_backend_graphs``), communicators (``_backend_collectives``).
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

from ..._errors import raise_stream_errors
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._kernel import MAX_BLOCK, MAX_BLOCK_THREADS, MAX_GRID, SHARED_MEM_LIMIT
from .. import _exit as at_exit
from .._allocation import Allocation
from .._exit import exit_timeout
from .._host_registry import HostRegistry
from .._protocol import TimelineRecord
from ._load import load as load_compiled
from ._memory import ADDRESSES, MACHINE_MEMORY, PinnedRegistry, Pool, check_mappable, guarded, typed_view
from ._ops import run_memcpy
from ._parallel import POOL_THREADS
from ._streams import BranchPool, CpuStream
from ._timeline import CpuRecording
from ._timeline import end as end_recording
from ._timeline import start as start_recording


def _host_bytes(ptr: int, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes of host memory at ``ptr`` as a writable uint8 array, viewed where they are."""
    raw = (ctypes.c_uint8 * nbytes).from_address(ptr) if nbytes else bytearray()
    # ctypes arrays export the buffer protocol; NumPy's stubs name buffer types one by one before Python 3.12.
    return np.frombuffer(raw, np.uint8)  # type: ignore[arg-type]


class CpuRuntime:
    """The backend's state, devices, memory and kernels: the bottom layer of CpuBackend."""

    def __init__(self, count: int) -> None:
        self._count = count
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

    # Timelines (recorded by the threads that run the work: _timeline)

    def timeline_start(self, index: int) -> CpuRecording:
        return start_recording(index)

    def timeline_stop(self, recording: CpuRecording, executables: Sequence[tuple[Any, Any]]) -> list[TimelineRecord]:
        end_recording(recording)  # first: a launch made from now on (on any thread) is not recorded, not even in part
        for stream in list(self._streams):  # (as device_synchronize waits, leaving the errors to it)
            if stream.index == recording.index:
                stream.wait_idle()
        return list(recording.records)

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
