"""Device: one GPU (or the CPU reference device) of one backend, and backend selection."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from . import _capture_rules
from ._attributes import device_limits
from ._errors import BackendUnavailableError
from ._event import Event
from ._host_memory import HostRegistration
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._kernel import Kernel
from ._memory import Array, enable_peer_access, normalize_dtype, normalize_shape
from ._properties import SCHEDULES
from ._scalars import describe
from ._semaphores import ExternalSemaphore
from ._stream import Stream
from ._user_objects import UserObject
from ._variables import symbol
from .backends import BACKEND_ORDER, available_backends, get_backend
from .backends._protocol import Backend

ENV_VAR = "GPUGRAPH_BACKEND"


@dataclass(frozen=True)
class GraphMemoryUsage:
    """Figures of a device's graph memory pool, in bytes (cudaDeviceGetGraphMemAttribute).

    Attributes:
        used: Memory held by graph allocations right now.
        reserved: Memory the pool holds, in use or ready for reuse.
        used_high: Highest ``used`` since the last reset.
        reserved_high: Highest ``reserved`` since the last reset.
    """

    used: int
    reserved: int
    used_high: int
    reserved_high: int


def _parse(spec: str) -> tuple[str, int]:
    name, sep, index = spec.strip().partition(":")
    if name not in BACKEND_ORDER:
        raise ValueError(f"Device: expected 'cuda', 'hip' or 'cpu', optionally with ':index', got {spec!r}")
    # ASCII digits only: str.isdigit and int() also take '²' and other Unicode digits.
    if sep and not (index.isascii() and index.isdigit()):
        raise ValueError(f"Device: the index after ':' must be a non-negative int, got {spec!r}")
    return name, int(index or 0)


class Device:
    """A device of one backend; ``Device(spec)`` returns the same object for the same device.

    Args:
        spec: ``"cuda"``, ``"cuda:1"``, ``"hip:0"``, ``"cpu"``. When None: ``$GPUGRAPH_BACKEND``, else
            the first available of cuda, hip, cpu.

    Raises:
        BackendUnavailableError: If the backend or the device index is not available here.
        ValueError: If ``spec`` is malformed.
    """

    backend: str
    """The backend's name: ``"cuda"``, ``"hip"`` or ``"cpu"``."""
    index: int
    """The device's index among the backend's devices."""
    name: str
    """The device's name, as the backend reports it."""
    _backend: Backend
    _default_stream: Stream | None
    _properties: Mapping[str, Any] | None = None  # (read when first asked for: properties)

    _instances: ClassVar[dict[tuple[str, int], Device]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    # Not Self: the instance returned is the one made for the device, which is a Device.
    def __new__(cls, spec: str | None = None) -> Device:  # noqa: PYI034
        if spec is None:
            spec = os.environ.get(ENV_VAR) or available_backends()[0]
        elif not isinstance(spec, str):
            raise TypeError(f"Device: spec must be a str such as 'cuda:0' or 'cpu', got {spec!r}")
        name, index = _parse(spec)
        key = (name, index)
        device = cls._instances.get(key)
        if device is not None:
            return device
        backend = get_backend(name)
        count = backend.device_count()
        if index >= count:
            raise BackendUnavailableError(f"{name}:{index}: this machine has {count} {name} device(s)")
        with cls._lock:
            device = cls._instances.get(key)
            if device is None:
                device = object.__new__(cls)
                device.backend = name
                device.index = index
                device._backend = backend
                device.name = backend.device_name(index)
                device._default_stream = None
                cls._instances[key] = device
        return device

    def __repr__(self) -> str:
        return f"Device('{self}')"

    def __str__(self) -> str:
        return f"{self.backend}:{self.index}"

    def __reduce__(self) -> tuple:
        return (Device, (str(self),))

    # Work and synchronisation

    def synchronize(self) -> None:
        """Block until all work on the device has finished, that of destroyed streams included; raise the
        errors the streams kept (host functions or CPU kernels that raised).

        Raises:
            Exception: The error of the one stream that had one, unchanged.
            StreamErrors: When several streams had one; ``.errors`` holds each. Every stream's error is
                reported once: the streams no longer keep them.
            CaptureError: If a stream of the device is capturing.
            GpuGraphError: If called from a host function.
        """
        _capture_rules.synchronize_device(self, "Device.synchronize")

    @property
    def default_stream(self) -> Stream:
        """The legacy default stream (stream 0): it synchronizes with blocking streams and cannot be captured."""
        if self._default_stream is None:
            self._default_stream = Stream(self, non_blocking=False, legacy=True)
        return self._default_stream

    def stream(self, non_blocking: bool = True, priority: int = 0) -> Stream:
        """Create a stream (see ``Stream``). ``priority``: lower numbers run first; one outside ``priority_range``
        is clamped to it, as CUDA does, and the stream's ``priority`` says the value it has.

        Raises:
            TypeError: If ``non_blocking`` is not a bool (or NumPy bool), or ``priority`` not an int (a NumPy
                integer too; not a bool).

        See also: cudaStreamCreateWithPriority.
        """
        if HOST_THREADS:
            refuse_in_host_function("Device.stream")
        return Stream(self, non_blocking, priority)

    def event(self, timing: bool = False) -> Event:
        """Create an event; ``timing=True`` lets ``elapsed_ms`` measure between two of them.

        Raises:
            TypeError: If ``timing`` is not a bool (or NumPy bool).
        """
        if HOST_THREADS:
            refuse_in_host_function("Device.event")
        return Event(self, timing)

    # Peers

    def can_access_peer(self, peer: Device) -> bool:
        """Whether the hardware lets kernels on this device read and write ``peer``'s memory.

        Raises:
            TypeError: If ``peer`` is not a Device.
            ValueError: If ``peer`` is this device or a device of another backend.

        See also: cudaDeviceCanAccessPeer.
        """
        self._check_peer(peer, "can_access_peer")
        return self._backend.device_can_access_peer(self.index, peer.index)

    def enable_peer_access(self, peer: Device) -> None:
        """Let kernels on this device read and write ``peer``'s memory: its Arrays and its stream-ordered
        allocations, and the graph allocations captured on its streams from then on. One direction
        (``peer.enable_peer_access(self)`` is the other); enabling it again does nothing. A launch or kernel
        node on this device given an Array of ``peer`` enables it by itself.

        Raises:
            TypeError: If ``peer`` is not a Device.
            ValueError: If ``peer`` is this device or a device of another backend, or the hardware allows no
                access between them (``can_access_peer``): copy the data with ``Stream.memcpy`` instead.
            CaptureError: If a capture that forbids unsafe calls runs (as for an allocation; enable access
                before capturing).

        See also: cudaDeviceEnablePeerAccess, cudaMemPoolSetAccess.
        """
        self._check_peer(peer, "enable_peer_access")
        enable_peer_access(self, peer, "enable_peer_access")

    def _check_peer(self, peer: Any, what: str) -> None:
        if not isinstance(peer, Device):
            raise TypeError(f"{what}(peer): expected a Device, got {type(peer).__name__}")
        if peer is self:
            raise ValueError(f"{what}(peer): {peer} is this device, which always accesses its own memory")
        if peer.backend != self.backend:
            raise ValueError(f"{what}(peer): {peer} is a device of another backend than {self}")

    # Memory

    def empty(self, shape: Any, dtype: Any = np.float32) -> Array:
        """Allocate uninitialised device memory (cudaMalloc); freed when the Array is collected."""
        _capture_rules.forbid_unsafe("Device.empty")
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        ptr, alloc = self._backend.mem_alloc(self.index, Array.bytes_for(shape, dtype))
        array = Array(self, ptr, shape, dtype, alloc)
        weakref.finalize(array, self._backend.mem_free, alloc).atexit = False
        return array

    def zeros(self, shape: Any, dtype: Any = np.float32) -> Array:
        """Allocate device memory filled with zeros."""
        _capture_rules.forbid_unsafe("Device.zeros")
        array = self.empty(shape, dtype)
        zeros = np.zeros(array.shape, array.dtype)
        self._backend.copy(array, zeros, array.nbytes)
        return array

    def asarray(self, data: Any, dtype: Any = None) -> Array:
        """Copy host data (anything ``numpy.asarray`` takes) into new device memory, synchronously."""
        _capture_rules.forbid_unsafe("Device.asarray")
        if type(data) is Array:
            raise TypeError(f"asarray(data): {data!r} is device memory already, not host data; copy it on the device "
                            f"with stream.memcpy(dev.empty_like(array), array), to any device of its backend")
        if dtype is not None:
            dtype = normalize_dtype(dtype)
        try:
            host = np.asarray(data, dtype=dtype, order="C")  # not ascontiguousarray: it makes 0-d arrays 1-d
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"asarray(data): NumPy makes no array of {describe(data)}: {exc}") from None
        if host.dtype.hasobject:
            raise TypeError(f"asarray(data): {describe(data)} is not an array of numbers (NumPy would hold it as "
                            f"Python objects, which device memory cannot); pass numbers, or an array of a "
                            f"plain-data dtype")
        array = self.empty(host.shape, host.dtype)
        self._backend.copy(array, host, array.nbytes)
        return array

    def empty_like(self, other: Any) -> Array:
        """Allocate uninitialised device memory of ``other``'s shape and dtype (Array or NumPy)."""
        if not hasattr(other, "shape") or not hasattr(other, "dtype"):
            raise TypeError(f"empty_like: expected an Array or NumPy array, got {type(other).__name__}")
        return self.empty(other.shape, other.dtype)

    def pinned(self, shape: Any, dtype: Any = np.float32) -> np.ndarray:
        """Allocate page-locked host memory as a NumPy array, for asynchronous copies."""
        _capture_rules.forbid_unsafe("Device.pinned")
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        raw = self._backend.pinned_empty(self.index, Array.bytes_for(shape, dtype))
        return raw.view(dtype).reshape(shape)

    @property
    def properties(self) -> Mapping[str, Any]:
        """The device's properties by their names in hipDeviceProp_t (cudaDeviceProp): ``totalGlobalMem``,
        ``multiProcessorCount``, ``asyncEngineCount``, ``concurrentKernels``, ... (``gpugraph.PROPERTIES`` lists them
        and what each is). Read once; a read-only mapping.

        See also: hipGetDeviceProperties, hipDeviceGetAttribute (cudaGetDeviceProperties, cudaDeviceGetAttribute).
        """
        properties = self._properties
        if properties is None:
            properties = self._properties = MappingProxyType(self._backend.device_properties(self.index))
        return properties

    @property
    def schedule(self) -> str:
        """How host threads wait for this device in a synchronize: "auto", "spin", "yield" or "blocking_sync" (see
        ``set_schedule``). See also: hipGetDeviceFlags (cudaGetDeviceFlags)."""
        return self._backend.device_schedule(self.index)

    def set_schedule(self, schedule: str) -> None:
        """Choose how host threads wait for this device in a synchronize: "spin" (lowest latency, a core busy),
        "yield" (spin, yielding the core), "blocking_sync" (sleep until woken: no core busy) or "auto" (the driver
        chooses by the number of cores and devices). The CPU backend's threads always sleep; it keeps the choice.

        Raises:
            ValueError: For another name.

        See also: hipSetDeviceFlags with hipDeviceScheduleSpin, ...Yield, ...BlockingSync, ...Auto
        (cudaSetDeviceFlags).
        """
        if schedule not in SCHEDULES:
            raise ValueError(f"set_schedule: expected one of {', '.join(map(repr, SCHEDULES))}, got {schedule!r}")
        self._backend.set_device_schedule(self.index, schedule)

    def register_host(self, array: np.ndarray, *, read_only: bool | None = None) -> HostRegistration:
        """Page-lock the memory of an existing NumPy array (the whole buffer it lies in) for every device of this
        backend, until the registration's ``release`` (or the end of its ``with`` block). ``pinned`` makes new
        page-locked memory instead.

        Copies to and from it then run asynchronously at their turn, and kernels may use it in place through
        ``device_array``. ``read_only``: the devices only read it (None: where the array is read-only, as a read-only
        memory map is). Graph and captured copies page-lock their NumPy operands themselves; registering the same
        memory again is counted. Keep the registration: dropping it releases it.

        Raises:
            TypeError: If ``array`` is not a NumPy array of plain data.
            ValueError: If it is empty, if its buffer lies partly in memory registered for another buffer, or the driver
                refuses to page-lock it.

        See also: hipHostRegister / cudaHostRegister.
        """
        if HOST_THREADS:
            refuse_in_host_function("Device.register_host")
        return HostRegistration(self, array, read_only)

    def symbol(self, kernel: Kernel, name: str, dtype: Any = None) -> Array:
        """The ``__device__``, ``__constant__`` or ``__managed__`` variable ``name`` of ``kernel``'s module on this
        device, as an Array: copies to and from it (streams, graph nodes, setters) are the ...ToSymbol and
        ...FromSymbol calls, and ``dst_origin=``/``src_origin=`` their offsets. The module is ``kernel``'s source,
        compiled once per device (a template's instance is a module of its own), and its kernels see the copies.

        Args:
            kernel: A Kernel of the source that declares the variable.
            name: Its name, in namespaces or not (``"table"``, ``"ns::table"``).
            dtype: The elements' type; None reads it from the declaration (a C number type). The shape is the
                declaration's dimensions where they are literal (``()`` for a scalar), else 1-D.

        Raises:
            ValueError: If the module has no such variable, or its size is no whole number of ``dtype`` elements.
            TypeError: If ``dtype`` is None and the declaration's type cannot be read.
            KernelCompileError: If the source does not compile.

        See also: hipModuleGetGlobal, cuModuleGetGlobal, cudaGetSymbolAddress, cudaGetSymbolSize.
        """
        if HOST_THREADS:
            refuse_in_host_function("Device.symbol")
        return symbol(self, kernel, name, dtype)

    def import_semaphore(self, handle: Any, *, timeline: bool = True) -> ExternalSemaphore:
        """Import another API's semaphore, for streams and graph nodes of this device to signal and wait on.

        Args:
            handle: On CUDA, the semaphore's file descriptor (Vulkan's vkGetSemaphoreFdKHR, an opaque fd): the import
                owns it once it succeeds (the driver closes it), and it stays the caller's if the import fails. On
                the CPU backend, a ``gg.EmulatedSemaphore``.
            timeline: Whether it is a timeline semaphore (signaled to and waited for at values), else binary.

        Raises:
            TypeError: If ``handle`` is not what this backend imports.
            ValueError: If the driver refuses the handle, or (CPU) an EmulatedSemaphore of the other kind.

        See also: hipImportExternalSemaphore, cudaImportExternalSemaphore (cudaExternalSemaphoreHandleTypeOpaqueFd,
        ...TimelineSemaphoreFd).
        """
        if HOST_THREADS:
            refuse_in_host_function("Device.import_semaphore")
        return ExternalSemaphore(self, handle, timeline)

    def graph_memory(self) -> GraphMemoryUsage:
        """The graph memory pool's figures (cudaDeviceGetGraphMemAttribute)."""
        return GraphMemoryUsage(**self._backend.graph_memory(self.index))

    def user_object(self, destroy: Callable[[], Any], count: int = 1) -> UserObject:
        """A UserObject of this device's backend: ``destroy()`` runs once its ``count`` references (the caller's) and
        those graphs take are all released. See also: cudaUserObjectCreate."""
        return UserObject(self._backend, destroy, count)

    def reset_graph_memory_high(self) -> None:
        """Start the graph memory pool's high watermarks (``used_high``, ``reserved_high``) again from the figures
        now. See also: cudaDeviceSetGraphMemAttribute (cudaGraphMemAttrUsedMemHigh, ...ReservedMemHigh)."""
        if HOST_THREADS:
            refuse_in_host_function("Device.reset_graph_memory_high")
        self._backend.graph_memory_reset_high(self.index)

    def trim_graph_memory(self) -> None:
        """Return pool memory that no graph allocation uses (cudaDeviceGraphMemTrim)."""
        self._backend.graph_memory_trim(self.index)

    # Kernel node attributes

    @property
    def priority_range(self) -> tuple[int, int]:
        """(least, greatest) priority of this device's streams and kernel nodes: lower numbers are greater
        priorities, e.g. (0, -5); one outside the range is clamped to it, as CUDA does. See also:
        cudaDeviceGetStreamPriorityRange."""
        return device_limits(self).priorities

