"""The CUDA backend's runtime layer: devices, memory, kernels, deferred releases and the exit (see _backend)."""

from __future__ import annotations

import atexit
import collections
import ctypes
import gc
import threading
import weakref
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ..._errors import BackendError, GpuGraphError, raise_stream_errors
from ..._host_threads import HOST_THREADS, refuse_in_host_function
from ..._memory import Array, allocation_of
from ..._memory import address_of as address
from .. import _exit as at_exit
from .._allocation import Allocation
from .._host_registry import HostRegistrationError, HostRegistry
from ._compile import ModuleCache
from ._driver import Contexts, call, error, fail
from ._host import HostCalls
from ._launch import Function
from ._objects import CudaCapture
from ._properties import read_properties, schedule_of, set_schedule
from ._symbols import drv

_ATTR = cu.CUgraphMem_attribute
_POINTER = cu.CUpointer_attribute
_DEVICE_MEMORY = (int(cu.CUmemorytype.CU_MEMORYTYPE_DEVICE), int(cu.CUmemorytype.CU_MEMORYTYPE_UNIFIED))
INVALID_CONTEXT = cu.CUresult.CUDA_ERROR_INVALID_CONTEXT
_RELAXED = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
_INVALID_VALUE = cu.CUresult.CUDA_ERROR_INVALID_VALUE
_OUT_OF_MEMORY = cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY
_LEGACY = cu.CUstream(cu.CU_STREAM_LEGACY)

# .active: the garbage collector runs on this thread. It runs on whatever thread allocates, one that queued work
# waits for included (a host function waiting for it), so the memory it frees waits (CudaRuntime._release_memory).
_COLLECTING = threading.local()


def _note_collection(phase: str, info: dict[str, Any]) -> None:
    _COLLECTING.active = phase == "start"


gc.callbacks.append(_note_collection)


class CudaRuntime:
    """The CUDA driver below graphs and capture: devices and their contexts, memory (with the releases deferred
    while a capture or a host function runs), kernels, and the wait for queued work at exit."""

    def __init__(self, count: int) -> None:
        self.contexts = Contexts(count)
        self.host = HostCalls()
        self._modules = ModuleCache()
        self._functions: dict[tuple[int, Any], Function] = {}
        self._static_shared: dict[tuple[int, Any], int] = {}  # by (device, Kernel): read once
        self._kernels_by_handle: dict[int, tuple[Any, int]] = {}  # CUfunction -> (Kernel, device index)
        self._peers: set[tuple[int, int]] = set()  # (device, peer) pairs whose access enable_peer_access enabled
        self._peer_lock = threading.Lock()
        # The captures begun and not yet ended: frees of plain memory wait until there is none. A set, so that
        # forgetting a capture twice (an end interrupted and finished again) is harmless.
        self._captures: set[CudaCapture] = set()
        # Releases waiting for the end of captures (or of a host function). One deque for the backend's life:
        # host-function threads append without the lock, and an append is never lost to a drain.
        self._deferred: collections.deque[tuple[Any, tuple]] = collections.deque()
        # Reentrant: garbage collection can run a finalizer, which takes this lock, at any allocation,
        # including one made while this thread already holds it.
        self._lock = threading.RLock()
        self.contexts.use(0)
        self._raised: set[int] = set()  # the driver errors synchronize calls raised (see _synchronize)
        self._exit_waiter = at_exit.ExitWaiter("gpugraph-cuda-exit")
        # Host memory page-locked for copies (Device.register_host, graph and captured copies): one registration
        # serves every device (portable), and a release waits as a free does (see _release_memory).
        self.host_registry = HostRegistry(self._register_host, self._unregister_host, self._locked_elsewhere,
                                           self._release_memory)
        atexit.register(self._finish_at_exit)

    # Devices

    def device_count(self) -> int:
        return len(self.contexts.devices)

    def device_name(self, index: int) -> str:
        name = call(drv.device_get_name, 256, self.contexts.devices[index])
        return name.split(b"\0", 1)[0].decode()

    def device_properties(self, index: int) -> dict[str, Any]:
        return read_properties(self.contexts.devices[index], self.device_name(index))

    def device_schedule(self, index: int) -> str:
        return schedule_of(self.contexts.devices[index])

    def set_device_schedule(self, index: int, schedule: str) -> None:
        set_schedule(self.contexts.devices[index], schedule)

    def device_synchronize(self, index: int) -> None:
        self._refuse_in_host_function("Device.synchronize")
        self.contexts.use(index)
        self._synchronize(drv.ctx_synchronize)
        self._flush_releases(called=True)
        # The error of every stream of the device, destroyed streams' included (None: a graph's host node
        # whose launch stream is unknown); each is reported once, as the CPU backend does.
        errors = self.host.errors
        raise_stream_errors([errors.pop(stream) for stream in list(errors)
                             if stream is None or stream.index == index])

    def device_can_access_peer(self, index: int, peer: int) -> bool:
        devices = self.contexts.devices
        return bool(call(drv.device_can_access_peer, devices[index], devices[peer]))

    def peer_access(self, index: int, peer: int) -> bool:
        return (index, peer) in self._peers

    def enable_peer_access(self, index: int, peer: int) -> None:
        with self._peer_lock:
            if (index, peer) in self._peers:
                return
            self.contexts.use(index)
            (err,) = drv.ctx_enable_peer_access(self.contexts.get(peer), 0)
            if err and err != cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:  # (another library enabled it)
                raise error("cuCtxEnablePeerAccess", err)
            # The peer's memory pool too: cuMemAllocAsync draws on it, and a captured allocation's access is the
            # pool's as the capture records it.
            pool = call(drv.device_get_mem_pool, self.contexts.devices[peer])
            call(drv.mem_pool_set_access, pool, [access_descriptor(index)], 1)
            self._peers.add((index, peer))

    def pool_access(self, index: int) -> tuple[int, ...]:
        """The other devices that device ``index``'s memory pool lets use its allocations (as gpugraph set it),
        which an allocation captured on its streams takes."""
        # (A copy first, one C call whole under the GIL: enable_peer_access may add to the set meanwhile.)
        return tuple(sorted(device for device, peer in frozenset(self._peers) if peer == index))

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
                    result = drv.ctx_synchronize()[0]
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
        ptr = self._allocate(nbytes, "device", drv.mem_alloc, max(nbytes, 1))
        return ptr, Allocation(ptr, nbytes, "device", index)

    def _allocate(self, nbytes: int, kind: str, fn: Any, *args: Any) -> int:
        """``allocate``'s address; out of memory, once more after the frees that waited have run (memory of collected
        Arrays and page-locked arrays may be among them)."""
        try:
            return int(allocate(nbytes, kind, fn, *args))
        except MemoryError:
            if not self._deferred:
                raise
            self._flush_releases(called=True)
            return int(allocate(nbytes, kind, fn, *args))

    def _release(self, fn: Any, *args: Any) -> None:
        """Release a driver object for a garbage-collected Python object. While a capture runs, or while the
        driver may be calling back on this thread, the release waits: destroying or freeing may synchronize,
        which invalidates captures, and the driver refuses CUDA calls on the threads it calls back on (a host
        function, or a graph's destructor dropping the last reference to a host node's arguments). Those that
        waited run at the next release made at once, synchronize or capture end (``_flush_releases``)."""
        if self._on_callback_thread():
            # Without the lock, which a release that waits for us may hold (deque.append is atomic).
            self._deferred.append((fn, args))
            return
        with self._lock:  # held through the release, so no capture can begin on another thread meanwhile
            if self._captures:
                self._deferred.append((fn, args))
                return
            fn(*args)
        if self._deferred:
            self._flush_releases()

    def _release_memory(self, fn: Any, *args: Any) -> None:
        """Free memory for a garbage-collected Python object (``_release``). cuMemFree and cuMemFreeHost wait for
        the device's queued work (2.9 s behind a host function blocked for 3 s: measured on the H200), so a free the
        garbage collector asks for waits too, for the next synchronize, allocation failure, capture end or release
        made at once: a collection that ran it would wait for work that may be waiting for the collecting thread."""
        if getattr(_COLLECTING, "active", False):
            self._deferred.append((fn, args))  # (without the lock, as on a callback thread: see _release)
            return
        self._release(fn, *args)

    def _on_callback_thread(self) -> bool:
        """Whether the driver may be calling back on this thread: inside a callback (marked), or on a thread
        Python did not start (a driver thread, where a collection can run a release between the driver's
        entry into a callback and its mark; another library's thread, whose releases wait for a flush)."""
        # (threading's class of a thread it did not start: it has no public name for one.)
        return (getattr(self.host.local, "in_callback", False)
                or isinstance(threading.current_thread(), threading._DummyThread))

    def _flush_releases(self, called: bool = False) -> None:
        """Run the releases that waited, once no capture runs; the first failure is raised after all ran.
        Any thread but one the driver is calling back on may run them (a thread Python did not start
        included: its releases wait, its flushes do not), outside a garbage collection (see _release_memory).
        ``called``: by the program, not by a release, so no garbage collection runs on this thread.

        Each is taken from the deque and run under the lock, as ``_release`` runs one, so no capture begins
        meanwhile; releases deferred while the flush runs are run by it too."""
        if called:
            # Called by the program (a synchronize, a capture's end, an allocation), which no collection runs: a mark
            # the collector's hook could not take off (interrupted by Ctrl-C, which Python then ignores) goes here.
            _COLLECTING.active = False
        deferred = self._deferred
        if not deferred or getattr(self.host.local, "in_callback", False) or getattr(_COLLECTING, "active", False):
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
        self._release_memory(self._free_now, alloc)

    def _free_now(self, alloc: Allocation) -> None:
        self.contexts.use(alloc.index)
        call(drv.mem_free, alloc.ptr)

    def pinned_empty(self, index: int, nbytes: int) -> np.ndarray:
        if HOST_THREADS:
            refuse_in_host_function("Device.pinned")
        self.contexts.use(index)
        ptr = self._allocate(nbytes, "page-locked host", drv.mem_host_alloc, max(nbytes, 1), 0)
        raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr)
        weakref.finalize(raw, self._release_memory, self._in_context, index, drv.mem_free_host, ptr).atexit = False
        # ctypes arrays export the buffer protocol; NumPy's stubs name buffer types one by one before Python 3.12.
        return np.frombuffer(raw, np.uint8, count=nbytes)  # type: ignore[call-overload]

    def _register_host(self, start: int, nbytes: int, read_only: bool) -> int:
        if HOST_THREADS:
            refuse_in_host_function("page-locking host memory (a copy node, a captured copy, Device.register_host)")
        self.contexts.use(0)
        # Portable: page-locked for every device's context. Mapped: kernels may reach it by its own address.
        flags = cu.CU_MEMHOSTREGISTER_PORTABLE | cu.CU_MEMHOSTREGISTER_DEVICEMAP
        if read_only:
            flags |= cu.CU_MEMHOSTREGISTER_READ_ONLY
        # In relaxed capture mode for the call: it touches no stream, but a capture in "global" mode on any thread
        # would refuse it as a potentially unsafe call and be invalidated (a copy recorded in a capture registers).
        mode = call(drv.thread_exchange_stream_capture_mode, _RELAXED)
        try:
            (err,) = drv.mem_host_register(start, nbytes, flags)
        finally:
            call(drv.thread_exchange_stream_capture_mode, mode)
        if err:
            raise HostRegistrationError(str(error("cuMemHostRegister", err)))
        return start

    def _unregister_host(self, start: int) -> None:
        # A copy the devices queued may still use the pages (a graph launched just before the last use of them went):
        # they finish their work first, as a free of page-locked memory waits for it.
        for index in self.contexts.retained():
            self.contexts.use(index)
            call(drv.ctx_synchronize)
        self.contexts.use(0)
        call(drv.mem_host_unregister, start)

    def _locked_elsewhere(self, ptr: int, nbytes: int) -> bool:
        # The driver knows page-locked memory (cuMemHostAlloc, cuMemHostRegister, other libraries' pinned memory), not
        # pageable memory. Both ends are asked, for a range that starts in page-locked memory and runs past it.
        self.contexts.use(0)
        return all(_memory_type(at) is not None for at in {ptr, ptr + max(nbytes, 1) - 1})

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        check_allocated(dst, src)
        self.contexts.use(_index(dst, src))
        # cuMemcpy returns before a copy from pageable host memory or between device memories is done, and a
        # non-blocking stream is not ordered after it: wait for it, so the copy is synchronous as documented.
        call(drv.memcpy_async, address(dst), address(src), nbytes, _LEGACY)
        call(drv.stream_synchronize, _LEGACY)

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
            ordinal = int(call(drv.pointer_get_attribute, _POINTER.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr))
            if ordinal != index:
                raise ValueError(f"the memory at {ptr:#x} is on cuda:{ordinal}, not cuda:{index}")
        return Allocation(ptr, nbytes, "device", index, owner=f"imported memory at {ptr:#x}")

    def mem_host_mapped(self, index: int, array: np.ndarray, keep: Any) -> Allocation:
        self.contexts.use(index)
        ptr = array.__array_interface__["data"][0]
        device_ptr = int(call(drv.mem_host_get_device_pointer, ptr, 0))  # (the same address with unified addressing)
        alloc = Allocation(device_ptr, array.nbytes, "device", index, owner=f"page-locked host memory at {ptr:#x}")
        alloc.keep = (array, keep)
        return alloc

    def graph_memory(self, index: int) -> dict[str, int]:
        device = self.contexts.devices[index]
        read = lambda attr: int(call(drv.device_get_graph_mem_attribute, device, attr))  # noqa: E731
        return {"used": read(_ATTR.CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT),
                "reserved": read(_ATTR.CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT),
                "used_high": read(_ATTR.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH),
                "reserved_high": read(_ATTR.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)}

    def graph_memory_reset_high(self, index: int) -> None:
        self.contexts.use(index)
        device = self.contexts.devices[index]
        for attr in (_ATTR.CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, _ATTR.CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH):
            call(drv.device_set_graph_mem_attribute, device, attr, cu.cuuint64_t(0))  # (0: reset, the only value)

    def graph_memory_trim(self, index: int) -> None:
        self.contexts.use(index)
        call(drv.device_graph_mem_trim, self.contexts.devices[index])

    # Kernels

    def kernel_load(self, index: int, kernel: Any) -> Function:
        key = (index, kernel)
        function = self._functions.get(key)
        if function is None:
            self.contexts.use(index)
            handle = self._modules.function(index, self.contexts.devices[index], kernel)
            function = self._functions[key] = Function(handle, kernel)
            self._kernels_by_handle[int(handle)] = (kernel, index)
        return function

    def kernel_static_shared(self, index: int, kernel: Any) -> int:
        size = self._static_shared.get((index, kernel))
        if size is None:
            handle = self.kernel_load(index, kernel).handle
            size = self._static_shared[(index, kernel)] = call(
                cu.cuFuncGetAttribute, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, handle)
        return size

    def kernel_variable(self, index: int, kernel: Any, name: str) -> Allocation | None:
        function = self.kernel_load(index, kernel)
        self.contexts.use(index)
        # (In the module the kernel's function came from: a template's instance has one of its own.)
        err, ptr, nbytes = drv.module_get_global(call(drv.func_get_module, function.handle), name.encode())
        # (No variable of that name: NOT_FOUND, or INVALID_VALUE where the name is a function's, as a kernel's is:
        # seen on an H100, driver 580.)
        if err in (cu.CUresult.CUDA_ERROR_NOT_FOUND, cu.CUresult.CUDA_ERROR_INVALID_VALUE):
            return None
        if err:
            raise error("cuModuleGetGlobal", err)
        return Allocation(int(ptr), int(nbytes), "device", index, owner=f"the module variable {name!r} of {kernel!r}")

    def function(self, index: int, kernel: Any) -> Function:
        return self._functions.get((index, kernel)) or self.kernel_load(index, kernel)

    def kernel_of(self, handle: Any) -> tuple[Any, int | None]:
        """The Kernel whose CUfunction ``handle`` is and the index of the device it was loaded on, else
        (None, None): a function another library loaded."""
        return self._kernels_by_handle.get(int(handle), (None, None))

    def loaded_functions(self) -> list[tuple[int, Any]]:
        """(CUfunction address, Kernel) of each function gpugraph loaded, on every device."""
        return [(handle, kernel) for handle, (kernel, _) in list(self._kernels_by_handle.items())]

    def context_device(self, ctx: Any, default: int) -> int:
        """The index of the device whose primary context ``ctx`` is; ``default`` for any other context."""
        for index in self.contexts.retained():
            if int(self.contexts.get(index)) == int(ctx):
                return index
        return default

    def _retry_in_context(self, fn: Any, index: int, *args: Any) -> None:
        """A hot call failed: make the context current (a new thread) and call once more."""
        self.contexts.use(index)
        call(fn, *args)

    def _in_context_leaf(self, index: int, api: str, fn: Any, *args: Any) -> None:
        """``_in_context`` for a call of ``_leaves``, which returns the driver's result as an int."""
        self.contexts.use(index)
        err = fn(*args)
        if err:
            fail(api, err)

    def _in_context(self, index: int, fn: Any, *args: Any) -> None:
        """A release from whatever thread the garbage collector runs on: set the device's context first."""
        self.contexts.use(index)
        call(fn, *args)



def access_descriptor(index: int) -> Any:
    """Read and write access for device ``index`` (the only access CUDA gives pools and graph allocations:
    measured on the H200, read-only is CUDA_ERROR_NOT_SUPPORTED)."""
    access = cu.CUmemAccessDesc()
    access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    access.location.id = index
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    return access


def allocate(nbytes: int, kind: str, fn: Any, *args: Any) -> Any:
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
    err, kind = drv.pointer_get_attribute(_POINTER.CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr)
    if err == _INVALID_VALUE:
        return None
    if err:
        raise error("cuPointerGetAttribute", err)
    return int(kind)


def check_allocated(*operands: Any) -> None:
    """Refuse a copy touching graph memory that is not allocated: the driver would take its unmapped
    address for host memory and crash the process."""
    for operand in operands:
        alloc = allocation_of(operand) if type(operand) is Array else None
        if alloc is not None and alloc.origin != "device" and not alloc.live:
            raise GpuGraphError(f"{operand!r} was used outside its allocation's lifetime: "
                                f"{alloc.owner} is not allocated now (before its allocation ran, "
                                f"or after its free)")


def _index(*operands: Any) -> int:
    """The device index of the first Array among ``operands`` (host arrays have none)."""
    for operand in operands:
        if type(operand) is Array:
            return operand.device.index
    return 0
