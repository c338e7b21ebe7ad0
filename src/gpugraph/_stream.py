"""Stream: ordered asynchronous work on a device (the markers that order work across streams are
gpugraph._event's Events)."""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _capture, _capture_rules, _graph_reads, _params
from ._attributes import device_limits
from ._device_like import DeviceLike
from ._errors import CaptureError, GraphError
from ._event import Event, event_handle, note_recorded, recorded_in
from ._hazards import CHECKING, note_where
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._kernel import Kernel, check_shared_mem, launch_dims
from ._memops import mem_ops_record
from ._memory import (
    Array,
    allocation_of,
    copy_box,
    host_pins,
    memcpy_nbytes,
    memset_pattern,
    memset_plane,
    normalize_dtype,
    normalize_shape,
)
from ._nodes import NodeKind, WaitValue, WriteValue
from ._params import resolve
from ._placement import check_same_backend, check_same_device, check_shared, load_kernel
from ._scalars import as_bool, as_int, describe
from ._semaphores import semaphore_record
from ._stream_state import StreamState
from .backends import get_backend

if TYPE_CHECKING:
    from ._graph import Graph

# The CUDA streams by native handle, while they live: every Stream gpugraph made (noted when made, since its
# handle can reach another library through ``ptr`` as well as ``__cuda_stream__``) and those made from other
# libraries' streams (gpugraph._interop), so that the same handle gives the same Stream, whose capture state
# is then the only one. The legacy default stream is not here: its handles are 0 and 1. An entry left at an
# address names a native stream destroyed meanwhile (another library's, wrapped without its owner): a new
# Stream there replaces it.
by_address: weakref.WeakValueDictionary[int, Stream] = weakref.WeakValueDictionary()
by_address_lock = threading.Lock()

# Stream.from_external, which applies the import rules of gpugraph._interop. That module sits above streams
# (it makes them, and resolves the default Device), so it sets this when imported.
external_stream: Callable[[Any, Any], Stream] = None  # type: ignore[assignment]  # (set before any call)

_ALLOC_RULE = ("stream-ordered allocation and freeing on a stream that is not capturing are forbidden while a "
               "'global' capture runs, or in the thread of a 'thread_local' one")


class Stream(StreamState):
    """An in-order queue of work on a device that runs asynchronously to the host.

    Created by ``Device.stream``. Every method enqueues and returns at once.

    See also: cudaStreamCreateWithPriority.
    """

    __slots__ = ()  # (the fields are StreamState's)
    _numbers = itertools.count(1)

    def __init__(self, device: DeviceLike, non_blocking: bool = True, priority: int = 0, *, legacy: bool = False,
                 _wrap: Any = None) -> None:
        """``legacy``: the device's legacy default stream. ``_wrap`` (gpugraph's own, not the user's): the
        backend's handle of a native stream gpugraph does not own (another library's, for
        ``Stream.from_external``; ``non_blocking`` and ``priority`` say what it is), destroyed by nothing here.
        A new stream's ``priority`` outside ``device.priority_range`` is clamped to it, as CUDA clamps it
        (cuStreamCreateWithPriority); ``priority`` is the value the stream has."""
        if as_bool(non_blocking) is None:  # (not truthiness: the string 'no' is truthy)
            raise TypeError(f"stream: non_blocking must be a bool, got {non_blocking!r}")
        number = as_int(priority)
        if number is None:
            raise TypeError(f"Device.stream(priority): expected an int, got {describe(priority)}")
        if not legacy and _wrap is None:
            number = device_limits(device).clamped_priority(number)
        self.device: Any = device  # (a Device: not named here, since gpugraph._device imports this module)
        self.non_blocking = bool(non_blocking) and not legacy
        self.priority = number
        self.legacy = legacy  # the legacy default stream (stream 0), which synchronizes with blocking streams
        backend = self._backend = get_backend(device.backend)
        self._capture: Any = None  # the Capture this stream records into, if any
        self._number = 0 if legacy else next(Stream._numbers)  # tells streams apart in messages
        if legacy:
            self._handle = backend.stream_default(device.index)
        elif _wrap is not None:
            self._handle = _wrap  # registered by its maker (gpugraph._interop), which knows the address
        else:
            self._handle = backend.stream_create(device.index, self.non_blocking, number)
            weakref.finalize(self, backend.stream_destroy, self._handle).atexit = False
            if backend.speaks_cuda:  # its handle, however another library gets it, must give this Stream back
                address = self.ptr
                with by_address_lock:
                    by_address[address] = self
        hot = self._hot = backend.hot
        # (A subclass's launches take the checked path, which refuses it as every call taking a Stream does.)
        self._hot_address = (0 if legacy or hot is None or type(self) is not Stream
                             else backend.stream_address(self._handle))

    def _blocking_captures(self) -> list[Any]:
        """The running captures of this stream's device that include a blocking stream."""
        return [c for c in list(_capture_rules.active)
                if c.stream.device is self.device and any(not s.non_blocking for s in c.streams)]

    @property
    def ptr(self) -> int:
        """The native stream handle as an int (cudaStream_t), for other libraries' external streams
        (``Stream.from_external`` of such a stream gives this Stream back)."""
        return self._backend.stream_address(self._handle)

    @property
    def __cuda_stream__(self) -> Callable[[], tuple[int, int]]:
        """The CUDA stream protocol: ``s.__cuda_stream__()`` is (0, handle), for other libraries' streams
        (``cupy.cuda.Stream.from_external(s)``, cuda.core); ``Stream.from_external`` of such a stream, or of
        one made from ``s.ptr`` (``torch.cuda.ExternalStream(s.ptr)``), gives ``s`` back.

        Raises:
            AttributeError: On a backend other than CUDA (so ``hasattr`` tells whether it applies).
        """
        if not self._backend.speaks_cuda:
            raise AttributeError(f"__cuda_stream__: {self!r} is not a CUDA stream")
        return lambda: (0, self.ptr)

    @classmethod
    def from_external(cls, stream: object, device: DeviceLike | None = None) -> Stream:
        """The Stream of a CUDA stream another library made (anything with ``__cuda_stream__``: CuPy,
        PyTorch, cuda.core streams), to launch, copy, capture and launch graphs on.

        The Stream does not own the native stream (never destroys it) and keeps ``stream`` alive as long
        as it lives; the same native stream always gives the same Stream (a gpugraph Stream's own handle
        gives that Stream), so its capture state is known. Handles 0 and 1 give ``device.default_stream``.

        Args:
            stream: The other library's stream, or a gpugraph Stream (returned as is).
            device: The Device it belongs to; None means ``Device()``. The driver is asked, so a stream of
                another device is refused.

        Raises:
            TypeError: If ``stream`` does not speak the CUDA stream protocol.
            ValueError: If ``device`` is not a CUDA device, the stream belongs to another device, the
                protocol's answer is malformed, or it is CUDA's per-thread default stream.
        """
        return external_stream(stream, device)

    @property
    def is_capturing(self) -> bool:
        """Whether the stream is recording into a capture (cudaStreamIsCapturing).

        Raises:
            CaptureError: On the legacy default stream while a blocking stream of its device captures (it
                synchronizes with blocking streams, so it cannot be used then; CUDA answers
                cudaErrorStreamCaptureImplicit). The capture goes on.
        """
        if self.legacy and _capture_rules.active:
            offended = self._blocking_captures()
            if offended:
                first = offended[0]
                raise CaptureError(f"Stream.is_capturing: the legacy default stream synchronizes with blocking "
                                   f"streams, and a blocking stream is capturing (capture on {first.stream!r}, "
                                   f"mode {first.mode!r}), so it cannot be used until that capture ends",
                                   api="Stream.is_capturing", stream=first.stream, mode=first.mode)
        return self._capture is not None

    @property
    def active_capture(self) -> Any:
        """The Capture this stream records into (its own, or one it joined through an event), else None: how a
        function that enqueues on ``current_stream()`` reaches the capture's explicit nodes (``add_while``, ...)
        when ``@captured`` or a caller captures it.
        """
        return self._capture

    def _note_captured(self) -> None:
        """(While $GPUGRAPH_CHECK_HAZARDS=1.) Note the user's line that made the node this stream's call just recorded
        in its capture (the stream's frontier), for hazards' messages; nothing where it recorded no node."""
        capture = self._capture
        if capture is not None:
            graph = capture.graph
            for handle in self._backend.capture_dependencies(capture_handle(self), self._handle):
                note_where(_graph_reads.node_of(graph, handle), again=False)

    def capture(self, mode: str = "global", into: Graph | None = None, after: Any = ()) -> _capture.Capture:
        """Record the work enqueued on this stream inside a ``with`` block into a graph.

        Args:
            mode: "global", "thread_local" or "relaxed" (see ``gpugraph._capture_rules`` for the rules).
            into: An existing Graph to append to (cudaStreamBeginCaptureToGraph), or None for a new one.
            after: With ``into``, nodes of that graph the first captured work depends on.

        Returns:
            A Capture; its ``graph`` holds the captured work once the block exits.

        See also: cudaStreamBeginCapture, cudaStreamEndCapture.
        """
        return _capture.Capture(self, mode, into, after)

    def _launch_checked(self, kernel: Kernel, grid: object, block: object, args: tuple, shared_mem: int) -> None:
        """``launch``'s every case but those the compiled core launches itself (StreamState.launch)."""
        if type(kernel) is not Kernel:
            raise TypeError(f"launch(kernel): expected a Kernel, got {type(kernel).__name__}")
        capture = self._capture
        if (capture is not None and capture.error is not None) or self.legacy or (
                capture is None and _capture_rules.function_captures):
            guard(self, "Stream.launch")
        if capture is None and kernel.launches_graphs:
            raise GraphError(f"Stream.launch({kernel!r}): the kernel takes a graph to launch (a cudaGraphExec_t), "
                             f"and a kernel that launches graphs runs only as a kernel node of a graph (CUDA fails "
                             f"its launch outside one); add it with Graph.add_kernel, or launch it on a stream that "
                             f"captures, and launch that graph")
        g, b = launch_dims(grid, block)
        if type(shared_mem) is not int or shared_mem:
            shared_mem = check_shared_mem(shared_mem)
        device = self.device
        # Untyped Params take their parameters' types only once the launch is made: a refused one changes none.
        if capture is not None:  # recorded in a node: typed as graph nodes are, Params kept, Conditions as their values
            converted = kernel.convert_args(args, device, typed=True, bind=False)
            args = _graph_reads.condition_values(capture.graph, converted, "launch", kernel)
        else:
            args = converted = kernel.convert_args(args, device, bind=False)
            if _params.in_use:
                args = tuple([resolve(a) for a in args])
        function = load_kernel(device, kernel)
        if shared_mem:
            check_shared(device, kernel, shared_mem)
        self._backend.stream_launch(self._handle, function, g, b, shared_mem, args,
                                    None if capture is None else capture._handle)
        if capture is not None and CHECKING:
            self._note_captured()
        if _params.in_use:
            kernel.bind_params(converted)

    def memcpy(self, dst: Any, src: Any, nbytes: int | None = None, *, shape: Any = None, dst_origin: Any = None,
               src_origin: Any = None) -> None:
        """Enqueue a copy of ``nbytes`` (default: all) from ``src`` to ``dst``, in any direction; or a 2-D or 3-D copy
        of the box ``shape`` (see ``Graph.add_memcpy``).

        Without ``nbytes``, ``dst`` and ``src`` must have the same dtype and size. A captured copy of
        0 bytes records no node. A captured copy holds its NumPy operands page-locked while its graph and executable
        graphs may run it, so that it reads and writes them at its turn (see ``Graph.add_memcpy``).

        See also: cudaMemcpyAsync, cudaMemcpy2DAsync, cudaMemcpy3DAsync.
        """
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.memcpy")
        box = None
        if shape is not None or dst_origin is not None or src_origin is not None:
            nbytes, box = copy_box(dst, src, nbytes, shape, dst_origin, src_origin, "memcpy")
        else:
            nbytes = memcpy_nbytes(dst, src, nbytes)
        check_same_backend(self.device, dst, "memcpy(dst)")  # (any device: a copy between devices needs no access)
        check_same_backend(self.device, src, "memcpy(src)")
        pins: tuple = ()
        if self._capture is not None:
            if not nbytes:
                return  # CUDA captures no node for a zero-byte copy
            pins = host_pins(self.device, dst, src, nbytes, box, "memcpy")
        self._backend.stream_memcpy(self._handle, dst, src, nbytes, capture_handle(self), box, pins)
        if CHECKING:
            self._note_captured()

    def memset(self, dst: Array, value: Any, count: int | None = None, *, shape: Any = None,
               origin: Any = None) -> None:
        """Enqueue setting ``count`` elements (default: all) of ``dst`` to ``value``; or a 2-D memset of the box
        ``shape`` at ``origin`` (see ``Graph.add_memset``).

        See also: cudaMemsetD8Async / D16 / D32, cudaMemset2DAsync.
        """
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.memset")
        if shape is not None or origin is not None:
            pattern, element_size, row, pitch, rows, offset = memset_plane(dst, value, count, shape, origin, "memset")
            check_same_device(self.device, dst, "memset(dst)")
            self._backend.stream_memset(self._handle, dst, value, pattern, element_size, row, capture_handle(self),
                                        (pitch, rows, offset))
            if CHECKING:
                self._note_captured()
            return
        pattern, element_size, units = memset_pattern(dst, value, count)
        check_same_device(self.device, dst, "memset(dst)")
        if not units and self._capture is not None:
            return  # CUDA captures no node for a memset of no elements
        self._backend.stream_memset(self._handle, dst, value, pattern, element_size, units, capture_handle(self))
        if CHECKING:
            self._note_captured()

    def signal_semaphores(self, semaphores: Any, values: Any = None) -> None:
        """Enqueue signaling ``semaphores`` (an ExternalSemaphore or a list): timeline ones to ``values`` (one int for
        all, or one per semaphore), binary ones (no value). Under capture, a semaphore signal node.

        See also: hipSignalExternalSemaphoresAsync, cudaSignalExternalSemaphoresAsync.
        """
        self._semaphores(NodeKind.SEMAPHORE_SIGNAL, semaphores, values, "signal_semaphores")

    def wait_semaphores(self, semaphores: Any, values: Any = None) -> None:
        """Make later work of this stream wait until ``semaphores`` are signaled: timeline ones to at least
        ``values``, binary ones once each. Under capture, a semaphore wait node.

        See also: hipWaitExternalSemaphoresAsync, cudaWaitExternalSemaphoresAsync.
        """
        self._semaphores(NodeKind.SEMAPHORE_WAIT, semaphores, values, "wait_semaphores")

    def _semaphores(self, kind: NodeKind, semaphores: Any, values: Any, what: str) -> None:
        record = semaphore_record(self.device, kind, semaphores, values, what)
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, f"Stream.{what}")
            if self._capture is not None:
                _capture.refuse_in_body(self._capture, f"Stream.{what}", kind.value.replace("_", " "))
        self._backend.stream_semaphores(self._handle, record, capture_handle(self))
        if CHECKING:
            self._note_captured()

    def wait_value(self, target: Array, value: int, condition: str = "geq", index: int = 0) -> None:
        """Make later work of this stream wait until element ``index`` of ``target`` (an Array of 4- or 8-byte
        integers) meets ``condition`` against ``value`` (``gg.WaitValue`` says how). Under capture, a batch memory-op
        node.

        See also: hipStreamWaitValue32/64, cuStreamWaitValue32/64.
        """
        self._mem_ops(WaitValue(target, value, condition, index), "wait_value")

    def write_value(self, target: Array, value: int, index: int = 0) -> None:
        """Enqueue writing ``value`` to element ``index`` of ``target`` (an Array of 4- or 8-byte integers). Under
        capture, a batch memory-op node.

        See also: hipStreamWriteValue32/64, cuStreamWriteValue32/64.
        """
        self._mem_ops(WriteValue(target, value, index), "write_value")

    def _mem_ops(self, op: Any, what: str) -> None:
        record = mem_ops_record(self.device, op, what)
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, f"Stream.{what}")
            if self._capture is not None:
                _capture.refuse_in_body(self._capture, f"Stream.{what}", "batch memory-op")
        self._backend.stream_mem_ops(self._handle, record, capture_handle(self))
        if CHECKING:
            self._note_captured()

    def host(self, fn: Callable[..., Any], *args: Any) -> None:
        """Enqueue a call of ``fn(*args)`` on the host, in stream order.

        An exception raised by ``fn`` surfaces at this stream's next ``synchronize``.

        See also: cudaLaunchHostFunc.
        """
        if not callable(fn):
            raise TypeError(f"host(fn): expected a callable, got {type(fn).__name__}")
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.host")
            if self._capture is not None:
                _capture.refuse_in_body(self._capture, "Stream.host", "host")
        self._backend.stream_host(self._handle, fn, args, capture_handle(self))
        if CHECKING:
            self._note_captured()

    def alloc(self, shape: Any, dtype: Any) -> Array:
        """Allocate device memory in stream order: usable by work enqueued after this call. Under capture it
        becomes an allocation node, reachable from the other devices that this device's pool lets in then
        (``enable_peer_access``).

        See also: cudaMallocAsync.
        """
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.alloc")
            if self._capture is not None:
                _capture.refuse_in_body(self._capture, "Stream.alloc", "memory allocation")
        if self._capture is None and _capture_rules.active:
            _capture_rules.forbid_unsafe("Stream.alloc", _ALLOC_RULE)
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        nbytes = Array.bytes_for(shape, dtype)
        ptr, alloc = self._backend.stream_alloc(self._handle, nbytes, capture_handle(self))
        if CHECKING:
            self._note_captured()
        array = Array(self.device, ptr, shape, dtype, alloc)
        capture = self._capture
        if capture is not None and alloc.origin == "graph":  # (else it ended meanwhile, on another thread)
            capture.allocations.append(array)
        return array

    def free(self, array: Array) -> None:
        """Free ``array`` in stream order (memory from ``alloc`` or a graph allocation).

        See also: cudaFreeAsync.
        """
        if type(array) is not Array:
            raise TypeError(f"free(array): expected an Array, got {type(array).__name__}")
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.free")
            if self._capture is not None:
                _capture.refuse_in_body(self._capture, "Stream.free", "memory free")
        if self._capture is None and _capture_rules.active:
            _capture_rules.forbid_unsafe("Stream.free", _ALLOC_RULE)
        check_same_device(self.device, array, "free(array)")
        alloc = allocation_of(array)
        if alloc.origin == "device":
            raise ValueError(f"free(array): {alloc.owner} came from Device.empty (or another library) and is "
                             f"freed by its owner; Stream.free takes memory from Stream.alloc or allocation nodes")
        if self._capture is not None:
            self._check_captured_free(alloc)
        elif not alloc.live:
            raise ValueError(f"free(array): {alloc.owner} is not allocated now (double free, or its graph "
                             f"has not been launched)")
        if not self._backend.stream_free(self._handle, alloc, capture_handle(self)):
            alloc.live = False  # (freed uncaptured: also if the capture ended meanwhile, on another thread)
        elif CHECKING:
            self._note_captured()

    def _check_captured_free(self, alloc: Any) -> None:
        """A captured free becomes a free node: it may free only graph memory, and only once per graph."""
        capture = self._capture
        if alloc.origin != "graph":
            raise _capture_rules.invalidate([capture], "Stream.free", f"{alloc.owner} was not made by a graph "
                                       f"allocation; a captured free can only free graph memory "
                                       f"(allocate it inside the capture)")
        graph = capture.graph  # allocations are told apart by record, not address: CUDA reuses addresses
        topology = _graph_reads.topology(graph)
        if any(freed is alloc and topology.records[i].kind.value == "mem_free" for i, freed in topology.allocs.items()):
            raise _capture_rules.invalidate([capture], "Stream.free",
                                       f"{alloc.owner} is already freed in this capture (double free)")

    def record(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) after the work enqueued so far; return it.

        See also: cudaEventRecord.
        """
        if event is None:
            event = Event(self.device, timing=False)
        elif not isinstance(event, Event):
            raise TypeError(f"record(event): expected an Event or None, got {type(event).__name__}")
        check_same_device(self.device, event, "record(event)")
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.record")
        captured = self._backend.event_record(event_handle(event), self._handle, capture_handle(self))
        note_recorded(event, self._capture if captured else None)  # (None too if it ended meanwhile, on another thread)
        return event

    def wait(self, event: Event) -> None:
        """Make work enqueued after this call wait for ``event``'s last record.

        Raises:
            CaptureError: If the wait breaks a capture rule (see docs/capture.md), or ``event`` was last
                recorded inside a capture that has ended (that record marks no work that runs).

        See also: cudaStreamWaitEvent.
        """
        if not isinstance(event, Event):
            raise TypeError(f"wait(event): expected an Event, got {type(event).__name__}")
        check_same_backend(self.device, event, "wait(event)")  # (an event of any device of the backend)
        recorded = recorded_in(event)
        capture = recorded if recorded is not None and recorded.active else None
        if self._capture is not None or self.legacy or _capture_rules.function_captures:
            guard(self, "Stream.wait", forking=capture is not None)
        if capture is not None and self._capture is not None and capture is not self._capture:
            raise _capture_rules.invalidate([self._capture, capture], "Stream.wait",
                                       "the event was recorded in another capture; two captures cannot merge")
        if capture is not None and self.legacy:
            raise _capture_rules.invalidate([capture], "Stream.wait", "the legacy default stream cannot join a capture")
        if capture is None and self._capture is not None:
            raise _capture_rules.invalidate([self._capture], "Stream.wait",
                                       "a capturing stream cannot wait for an event recorded outside the capture")
        if capture is None and recorded is not None:
            self._refuse_ended_capture_event(event)
        # (The capture's own record of which events are its: the backend forks or joins as it says.)
        if not self._backend.stream_wait_event(self._handle, event_handle(event),
                                               None if capture is None else capture._handle):
            self._refuse_ended_capture_event(event)  # (it ended on another thread meanwhile)
        if capture is not None and self._capture is None:
            _capture.fork(capture, self)  # this stream now records into the capture

    def _refuse_ended_capture_event(self, event: Event) -> None:
        raise CaptureError(f"Stream.wait: {event!r} was last recorded inside a capture that has ended; that record "
                           f"marks no work that runs, so it cannot be waited for (the CUDA driver refuses it: "
                           f"record the event again outside a capture first)", api="Stream.wait", stream=self)

    def synchronize(self) -> None:
        """Block until all work enqueued on this stream has finished.

        Raises:
            Exception: The first exception raised by a host function or CPU kernel on this stream
                since the last synchronize; the stream stays usable.
            CaptureError: If the stream is capturing.
            GpuGraphError: If called from a host function (which must not wait or enqueue).

        See also: cudaStreamSynchronize.
        """
        if self._capture is not None:
            self._refuse_wait("Stream.synchronize")
        elif self.legacy:
            guard(self, "Stream.synchronize")
        _capture_rules.forbid_unsafe("Stream.synchronize", _capture_rules.WAIT_RULE)
        self._backend.stream_synchronize(self._handle)

    @property
    def done(self) -> bool:
        """Whether all work enqueued on this stream has finished (cudaStreamQuery)."""
        if self._capture is not None:
            self._refuse_wait("Stream.done")
        elif self.legacy:
            guard(self, "Stream.done")
        if HOST_THREADS:
            refuse_in_host_function("Stream.done")
        _capture_rules.forbid_unsafe("Stream.done", _capture_rules.WAIT_RULE)
        return self._backend.stream_query(self._handle)

    def _refuse_wait(self, api: str) -> None:
        _capture_rules.check_usable(self._capture, api)
        raise _capture_rules.invalidate([self._capture], api, "a capturing stream runs nothing, so it cannot be "
                                                         "waited for or queried")

    def __repr__(self) -> str:
        if self.legacy:
            return f"Stream(#0 legacy default stream, device={self.device})"
        return f"Stream(#{self._number}, device={self.device}, non_blocking={self.non_blocking})"


# What a call enqueued on a stream from outside Stream's methods meets (GraphExec.launch, collectives), as Stream's
# own calls do.


def guard(stream: Stream, api: str, forking: bool = False) -> None:
    """Checks of ``api``, a call enqueued on ``stream``, for a stream that captures, is the legacy stream, or is used
    while a ``@captured`` function captures (kept off the common path). ``forking``: the call joins ``stream`` to a
    capture."""
    capture = stream._capture
    if capture is not None:
        _capture_rules.check_usable(capture, api)
        if stream is capture.stream and api != "Stream.launch":
            _capture.refuse_kinded_frontier(capture, api)
        return
    if stream.legacy:
        offended = stream._blocking_captures()
        if offended:
            raise _capture_rules.invalidate(offended, api, "the legacy default stream synchronizes with "
                                                           "blocking streams, and a blocking stream is capturing")
    if _capture_rules.function_captures and not forking:
        # (A thread capturing a @captured function: work on a stream of its device that does not capture would run
        # once now and never be part of the graph.)
        capture = _capture_rules.function_captures.get(threading.get_ident())
        if capture is not None and capture.stream.device is stream.device:
            raise _capture_rules.invalidate([capture], api, f"{stream!r} is not capturing, so a captured function's "
                                                            f"work on it would run once now and never be part of the "
                                                            f"graph; enqueue on gg.current_stream() (the capturing "
                                                            f"stream)")


def capture_handle(stream: Stream) -> Any:
    """The backend's record of the capture ``stream`` takes part in (passed with its calls), else None."""
    capture = stream._capture
    return None if capture is None else capture._handle
