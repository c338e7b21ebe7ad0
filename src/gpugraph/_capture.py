"""Stream capture: the Capture context manager and the rules of which calls a capture forbids.

The rules are CUDA's (cudaStreamBeginCapture, "Prohibited and unhandled operations"):

* Always invalid while a stream captures, in every mode: synchronizing or querying a capturing stream,
  an event last recorded inside a capture, or the device; waiting from a capturing stream on an event
  recorded outside any capture; merging two captures through an event; using the legacy default stream
  while a blocking stream captures; beginning a second capture on a capturing stream.
* "Potentially unsafe" calls (synchronous allocation, synchronous copies, and waiting for a stream or event
  outside the capture) are forbidden to the thread
  that began a ``global`` or ``thread_local`` capture, and to every thread while any ``global`` capture
  runs; ``relaxed`` captures forbid them to no one.

A forbidden call raises CaptureError at once and invalidates the capture: the error names the call, the
stream and the mode, and carries the traceback of the offending line. Later calls on the invalidated
capture raise a CaptureError that repeats the first one, so the first cause is never buried.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from ._errors import CaptureError

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

    from ._graph import Graph

MODES = ("global", "thread_local", "relaxed")
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_lock = threading.Lock()
_active: list[Capture] = []
# Threads now capturing a ``@captured`` function, each with its Capture: the function's work must go to the
# capturing stream, since work on any other stream of the device would run once and stay out of the graph.
function_captures: dict[int, Capture] = {}


def _where() -> str:
    """The caller's stack, without gpugraph's own frames: where the user made the call."""
    frames = [f for f in traceback.extract_stack()
              if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR + os.sep)]
    return "".join(traceback.format_list(frames[-6:])).rstrip()


def _invalidate(captures: Iterable[Capture], api: str, rule: str) -> CaptureError:
    """Mark ``captures`` invalidated by ``api`` and return the error to raise."""
    captures = list(captures)
    first = captures[0]
    error = CaptureError(f"{api}: {rule} (capture on {first.stream!r}, mode {first.mode!r}); "
                         f"the capture is invalidated", api=api, stream=first.stream, mode=first.mode,
                         where=_where())
    for capture in captures:
        if capture.error is None:
            capture.error = error
    return error


_UNSAFE = ("synchronous allocations and copies are forbidden while a 'global' capture runs, or in the "
           "thread of a 'thread_local' one")


def forbid_unsafe(api: str, rule: str = _UNSAFE) -> None:
    """Refuse a 'potentially unsafe' call (synchronous allocation, copy or wait) that a running capture forbids."""
    if not _active:
        return
    me = threading.get_ident()
    offended = [c for c in list(_active)
                if (c.thread == me and c.mode != "relaxed") or (c.thread != me and c.mode == "global")]
    if offended:
        raise _invalidate(offended, api, rule)


def forbid_device_sync(api: str, device: Any) -> None:
    """Refuse waiting for a whole device while one of its streams captures."""
    if not _active:
        return
    offended = [c for c in list(_active) if c.stream.device is device]
    if offended:
        raise _invalidate(offended, api, f"{device} has a capturing stream, which runs nothing, so the "
                                         f"device cannot be waited for")


def refuse_outside_function_capture(stream: Any, api: str) -> None:
    """Refuse work enqueued on ``stream`` (not capturing) by a thread capturing a ``@captured`` function."""
    capture = function_captures.get(threading.get_ident())
    if capture is not None and capture.stream.device is stream.device:
        raise _invalidate([capture], api, f"{stream!r} is not capturing, so a captured function's work on it "
                                          f"would run once now and never be part of the graph; enqueue on "
                                          f"gg.current_stream() (the capturing stream)")


def check_usable(capture: Capture, api: str) -> None:
    """Raise the first error again if ``capture`` was invalidated (later calls fail, naming the cause)."""
    error = capture.error
    if error is not None:
        raise CaptureError(f"{api}: the capture was invalidated earlier by {error.api}: {error}",
                           api=error.api, stream=error.stream, mode=error.mode)


class Capture:
    """A stream capture, used as ``with stream.capture(...) as cap:``.

    Work enqueued on the stream inside the block (and on streams it forks to through events) is
    recorded into ``cap.graph`` instead of run. The combined approach: ``cap.dependencies`` is the
    stream's capture frontier, ``cap.set_dependencies`` replaces it, and ``cap.add_kernel`` and friends
    add an explicit node at the frontier and advance it, returning the node for later updates.

    Attributes:
        stream: The stream the capture began on.
        mode: "global", "thread_local" or "relaxed".
        graph: The graph being captured into; complete once the block has exited.
    """

    # None before a capture that makes its own graph begins, and after an abandoned capture. Typed
    # ``Graph | Any`` (typeshed's "Any trick") so that ``cap.graph.instantiate()`` after the block, the
    # common use, needs no None check.
    graph: Graph | Any

    def __init__(self, stream: Any, mode: str, into: Any, after: Any) -> None:
        from ._graph import Graph, _as_nodes
        if mode not in MODES:
            raise ValueError(f"capture(mode): expected one of {', '.join(MODES)}, got {mode!r}")
        if into is not None and not isinstance(into, Graph):
            raise TypeError(f"capture(into): expected a Graph or None, got {type(into).__name__}")
        if into is not None and into.device is not stream.device:
            raise ValueError(f"capture(into): the graph is on {into.device}, the stream on {stream.device}")
        self.stream = stream
        self.mode = mode
        self.graph = into
        self._into = into
        self._after = _as_nodes(after)
        if self._after and into is None:
            raise ValueError("capture(after): starting dependencies need into=graph")
        self.thread = threading.get_ident()
        self.streams: list[Any] = []
        self.error: CaptureError | None = None
        self.active = False
        self.allocations: list[Any] = []  # Arrays allocated on its streams: graph memory
        self._nodes_before: set[Any] = set()
        # Frontiers that set_dependencies replaced: work they held was joined, as CUDA judges a join by
        # what the capturing stream waited on, not by what its final frontier still reaches.
        self._replaced_frontiers: list[Any] = []

    # Entering and leaving

    def __enter__(self) -> Self:
        from ._graph import Graph
        stream = self.stream
        if self.active or self.streams:
            raise CaptureError("capture: this Capture was used already; call stream.capture() again",
                               api="Stream.capture", stream=stream, mode=self.mode, where=_where())
        if stream._capture is not None:
            raise CaptureError(f"capture: {stream!r} is already capturing; captures cannot nest on one stream",
                               api="Stream.capture", stream=stream, mode=self.mode, where=_where())
        if stream.legacy:
            raise CaptureError("capture: the legacy default stream cannot be captured; use Device.stream()",
                               api="Stream.capture", stream=stream, mode=self.mode, where=_where())
        backend = stream._backend
        deps = self._into._deps(self._after, "capture") if self._into is not None else []
        if self._into is not None:
            self._into._changing()  # executable graphs made from it read it before the capture adds to it
            self._nodes_before = set(backend.graph_nodes(self._into._handle))
        handle = backend.stream_begin_capture(stream._handle, self.mode,
                                              None if self._into is None else self._into._handle, deps)
        if self._into is None:
            self.graph = Graph._wrap(stream.device, handle, own=False)
        self.active = True
        self._join(stream)
        with _lock:
            _active.append(self)
        return self

    def _join(self, stream: Any) -> None:
        stream._capture = self
        self.streams.append(stream)

    def _finish(self) -> None:
        self.active = False
        for stream in self.streams:
            stream._capture = None
        with _lock:
            _active.remove(self)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        backend = self.stream._backend
        if exc_type is not None or self.error is not None:
            self._abort()
            error = self.error
            if exc_type is None and error is not None:  # the capture's own error, not the user's
                raise CaptureError(str(error).split("\nThe offending call")[0], api=error.api,
                                   stream=error.stream, mode=error.mode, where=error.where)
            return False  # the user's own exception propagates
        unjoined = self._unjoined_streams()
        if unjoined:
            self._abort()
            names = ", ".join(repr(s) for s in unjoined)
            raise CaptureError(f"capture end: {names} forked from the capture through an event but its work "
                               f"was not joined back into {self.stream!r} (record an event on it and "
                               f"wait for that event on the capturing stream)", api="Stream.capture (end)",
                               stream=self.stream, mode=self.mode)
        try:
            backend.stream_end_capture(self.stream._handle)
        except CaptureError as error:
            self._abort()
            raise CaptureError(str(error), api="Stream.capture (end)", stream=self.stream,
                               mode=self.mode, where=_where()) from None
        self._finish()
        if self._into is None:
            self.graph._take()
        self.graph._refresh()
        return False

    def _unjoined_streams(self) -> list[Any]:
        """Streams forked into the capture whose last work the capturing stream never waited for.

        A forked stream is joined when every node of its frontier was, at some time, in the capturing
        stream's frontier or before a node that was: a join stays a join after ``set_dependencies``
        moves the frontier on (CUDA's rule, measured: tools/gpu_probe_rules.py, cases 1a-1i).
        """
        if len(self.streams) == 1:
            return []  # nothing was forked: no walk through the graph
        backend = self.stream._backend
        graph = self.graph._handle
        joined: set[Any] = set()
        pending = list(backend.stream_capture_dependencies(self.stream._handle)) + self._replaced_frontiers
        while pending:
            handle = pending.pop()
            if handle not in joined:
                joined.add(handle)
                pending.extend(backend.node_dependencies(graph, handle))
        return [s for s in self.streams[1:]
                if any(h not in joined for h in backend.stream_capture_dependencies(s._handle))]

    def _join_forks(self) -> None:
        """Make the capturing stream wait for every forked stream, as a clean end of capture needs."""
        backend, origin = self.stream._backend, self.stream
        for stream in self._unjoined_streams():
            event = backend.event_create(origin.device.index, False)
            backend.event_record(event, stream._handle)
            backend.stream_wait_event(origin._handle, event)
            backend.event_destroy(event)

    def _abort(self) -> None:
        """End the capture, discard what it recorded, and leave an ``into`` graph as it was."""
        backend = self.stream._backend
        try:
            self._join_forks()
            backend.stream_abort_capture(self.stream._handle)
        finally:
            self._finish()
            if self._into is not None:
                for handle in backend.graph_nodes(self._into._handle):
                    if handle not in self._nodes_before:
                        backend.graph_destroy_node(self._into._handle, handle)
                self._into._forget_missing()
            self.graph = None

    # The combined approach

    @property
    def dependencies(self) -> tuple[Any, ...]:
        """The capture frontier of the stream: the nodes the next captured work will depend on.

        See also: cudaStreamGetCaptureInfo.
        """
        self._check_active("dependencies")
        backend = self.stream._backend
        return tuple(self.graph._node(h) for h in backend.stream_capture_dependencies(self.stream._handle))

    def set_dependencies(self, nodes: Any) -> None:
        """Replace the stream's capture frontier with ``nodes`` (nodes of ``cap.graph``).

        See also: cudaStreamUpdateCaptureDependencies (cudaStreamSetCaptureDependencies).
        """
        self._check_active("set_dependencies")
        deps = self.graph._deps(nodes, "set_dependencies")
        backend = self.stream._backend
        self._replaced_frontiers.extend(backend.stream_capture_dependencies(self.stream._handle))
        backend.stream_set_capture_dependencies(self.stream._handle, deps)

    def _append(self, api: str, add: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._check_active(api)
        node = add(*args, after=self.dependencies, **kwargs)
        self.stream._backend.stream_set_capture_dependencies(self.stream._handle, [node._handle])
        return node

    def add_kernel(self, kernel: Any, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> Any:
        """Add a kernel node at the frontier and advance it (see ``Graph.add_kernel``)."""
        return self._append("add_kernel", self.graph.add_kernel, kernel, grid, block, *args, shared_mem=shared_mem)

    def add_memcpy(self, dst: Any, src: Any, nbytes: int | None = None) -> Any:
        """Add a copy node at the frontier and advance it (see ``Graph.add_memcpy``)."""
        return self._append("add_memcpy", self.graph.add_memcpy, dst, src, nbytes)

    def add_memset(self, dst: Any, value: Any, count: int | None = None) -> Any:
        """Add a memset node at the frontier and advance it (see ``Graph.add_memset``)."""
        return self._append("add_memset", self.graph.add_memset, dst, value, count)

    def add_host(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Add a host node at the frontier and advance it (see ``Graph.add_host``)."""
        return self._append("add_host", self.graph.add_host, fn, *args)

    def add_child(self, graph: Any) -> Any:
        """Add a child-graph node at the frontier and advance it (see ``Graph.add_child``)."""
        return self._append("add_child", self.graph.add_child, graph)

    def add_empty(self) -> Any:
        """Add an empty node at the frontier and advance it (see ``Graph.add_empty``)."""
        return self._append("add_empty", self.graph.add_empty)

    def _check_active(self, api: str) -> None:
        if not self.active:
            raise CaptureError(f"Capture.{api}: the capture is not running (use it inside the with block)",
                               api=f"Capture.{api}", stream=self.stream, mode=self.mode)
        check_usable(self, f"Capture.{api}")

    def __repr__(self) -> str:
        state = "active" if self.active else "ended"
        return f"Capture({self.stream!r}, mode={self.mode!r}, {state})"
