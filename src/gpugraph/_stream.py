"""Stream and Event: ordered asynchronous work on a device, and markers that order work across streams."""

from __future__ import annotations

import weakref
from typing import Any, Callable

from ._kernel import Kernel, check_shared_mem, launch_dims
from ._memory import Array, memcpy_nbytes, memset_pattern, normalize_dtype, normalize_shape


class Event:
    """A marker in a stream's work; created by ``Device.event`` or ``Stream.record``.

    See also: cudaEventCreateWithFlags.
    """

    __slots__ = ("device", "timing", "_backend", "_handle", "__weakref__")

    def __init__(self, device: Any, timing: bool) -> None:
        self.device = device
        self.timing = bool(timing)
        self._backend = device._backend
        self._handle = self._backend.event_create(device.index, self.timing)
        weakref.finalize(self, self._backend.event_destroy, self._handle)

    def synchronize(self) -> None:
        """Block until the work before the event's last record has finished."""
        self._backend.event_synchronize(self._handle)

    @property
    def done(self) -> bool:
        """Whether the work before the event's last record has finished (True if never recorded)."""
        return self._backend.event_query(self._handle)

    def elapsed_ms(self, end: "Event") -> float:
        """Milliseconds between this event's last record and ``end``'s.

        Raises:
            TypeError: If ``end`` is not an Event.
            ValueError: If either event was made with ``timing=False``, or has not completed.
        """
        if not isinstance(end, Event):
            raise TypeError(f"elapsed_ms(end): expected an Event, got {type(end).__name__}")
        for which, event in (("start", self), ("end", end)):
            if not event.timing:
                raise ValueError(f"elapsed_ms: the {which} event was created with timing=False")
            if not event.done:
                raise ValueError(f"elapsed_ms: the {which} event has not completed; synchronize it first")
        return self._backend.event_elapsed_ms(self._handle, end._handle)

    def __repr__(self) -> str:
        return f"Event(device={self.device}, timing={self.timing})"


class Stream:
    """An in-order queue of work on a device that runs asynchronously to the host.

    Created by ``Device.stream``. Every method enqueues and returns at once.

    See also: cudaStreamCreateWithPriority.
    """

    __slots__ = ("device", "non_blocking", "priority", "_backend", "_handle", "__weakref__")

    def __init__(self, device: Any, non_blocking: bool = True, priority: int = 0) -> None:
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"stream: priority must be an int, got {priority!r}")
        self.device = device
        self.non_blocking = bool(non_blocking)
        self.priority = priority
        self._backend = device._backend
        self._handle = self._backend.stream_create(device.index, self.non_blocking, priority)
        weakref.finalize(self, self._backend.stream_destroy, self._handle)

    def launch(self, kernel: Kernel, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> None:
        """Enqueue ``kernel<<<grid, block, shared_mem, self>>>(*args)``.

        Raises:
            TypeError: If ``kernel`` is not a Kernel or an argument has an unsupported type.
            ValueError: If grid/block/shared_mem are out of range.
            KernelCompileError: If the kernel fails to compile for this device.
            GpuGraphError: If the backend cannot run the kernel (no CPU implementation, say).

        See also: cudaLaunchKernel.
        """
        if type(kernel) is not Kernel:
            raise TypeError(f"launch(kernel): expected a Kernel, got {type(kernel).__name__}")
        function = kernel._functions.get(self.device) or self.device._load_kernel(kernel)
        grid, block = launch_dims(grid, block)
        if shared_mem:
            shared_mem = check_shared_mem(shared_mem)
        self._backend.stream_launch(self._handle, function, grid, block, shared_mem,
                                    kernel.convert_args(args, self.device))

    def memcpy(self, dst: Any, src: Any, nbytes: int | None = None) -> None:
        """Enqueue a copy of ``nbytes`` (default: all) from ``src`` to ``dst``, in any direction.

        See also: cudaMemcpyAsync.
        """
        nbytes = memcpy_nbytes(dst, src, nbytes)
        self.device._check_same_device(dst, "memcpy(dst)")
        self.device._check_same_device(src, "memcpy(src)")
        self._backend.stream_memcpy(self._handle, dst, src, nbytes)

    def memset(self, dst: Array, value: Any, count: int | None = None) -> None:
        """Enqueue setting ``count`` elements (default: all) of ``dst`` to ``value``.

        See also: cudaMemsetD8Async / D16 / D32.
        """
        pattern, element_size, units = memset_pattern(dst, value, count)
        self.device._check_same_device(dst, "memset(dst)")
        self._backend.stream_memset(self._handle, dst, pattern, element_size, units)

    def host(self, fn: Callable[..., Any], *args: Any) -> None:
        """Enqueue a call of ``fn(*args)`` on the host, in stream order.

        An exception raised by ``fn`` surfaces at this stream's next ``synchronize``.

        See also: cudaLaunchHostFunc.
        """
        if not callable(fn):
            raise TypeError(f"host(fn): expected a callable, got {type(fn).__name__}")
        self._backend.stream_host(self._handle, fn, args)

    def alloc(self, shape: Any, dtype: Any) -> Array:
        """Allocate device memory in stream order: usable by work enqueued after this call.

        See also: cudaMallocAsync.
        """
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        nbytes = Array.bytes_for(shape, dtype)
        ptr, alloc = self._backend.stream_alloc(self._handle, nbytes)
        return Array(self.device, ptr, shape, dtype, alloc)

    def free(self, array: Array) -> None:
        """Free ``array`` in stream order (memory from ``alloc`` or a graph allocation).

        See also: cudaFreeAsync.
        """
        if type(array) is not Array:
            raise TypeError(f"free(array): expected an Array, got {type(array).__name__}")
        self.device._check_same_device(array, "free(array)")
        self._backend.stream_free(self._handle, array._alloc)

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) after the work enqueued so far; return it.

        See also: cudaEventRecord.
        """
        if event is None:
            event = Event(self.device, timing=False)
        elif not isinstance(event, Event):
            raise TypeError(f"record(event): expected an Event or None, got {type(event).__name__}")
        self.device._check_same_device(event, "record(event)")
        self._backend.event_record(event._handle, self._handle)
        return event

    def wait(self, event: Event) -> None:
        """Make work enqueued after this call wait for ``event``'s last record.

        See also: cudaStreamWaitEvent.
        """
        if not isinstance(event, Event):
            raise TypeError(f"wait(event): expected an Event, got {type(event).__name__}")
        self.device._check_same_device(event, "wait(event)")
        self._backend.stream_wait_event(self._handle, event._handle)

    def synchronize(self) -> None:
        """Block until all work enqueued on this stream has finished.

        Raises:
            Exception: The first exception raised by a host function or CPU kernel on this stream
                since the last synchronize; the stream stays usable.

        See also: cudaStreamSynchronize.
        """
        self._backend.stream_synchronize(self._handle)

    @property
    def done(self) -> bool:
        """Whether all work enqueued on this stream has finished (cudaStreamQuery)."""
        return self._backend.stream_query(self._handle)

    def __repr__(self) -> str:
        return f"Stream(device={self.device}, non_blocking={self.non_blocking}, priority={self.priority})"
