"""GraphExec: an instantiated graph, launched with one call."""

from __future__ import annotations

import weakref
from typing import Any

from ._errors import GraphError
from ._stream import Stream


class GraphExec:
    """An executable graph, made by ``Graph.instantiate``; launch it on any stream of its device.

    Usable as a context manager; ``close`` (or garbage collection) releases it.

    See also: cudaGraphExec_t.
    """

    __slots__ = ("graph", "device", "_backend", "_handle", "_launch", "_finalizer", "__weakref__")

    def __init__(self, graph: Any, auto_free_on_launch: bool) -> None:
        self.graph = graph
        self.device = graph.device
        self._backend = backend = graph._backend
        self._handle = backend.graph_instantiate(graph._handle, bool(auto_free_on_launch))
        self._launch = backend.exec_launch
        self._finalizer = weakref.finalize(self, backend.exec_destroy, self._handle)
        self._finalizer.atexit = False  # the driver may be gone at interpreter exit

    def _stream_handle(self, stream: Any, what: str) -> Any:
        if self._handle is None:
            raise GraphError(f"{what}: this GraphExec is closed")
        if type(stream) is not Stream:
            raise TypeError(f"{what}(stream): expected a Stream, got {type(stream).__name__}")
        if stream.device is not self.device:
            raise ValueError(f"{what}: the stream is on {stream.device}, the graph on {self.device}")
        return stream._handle

    def launch(self, stream: Stream) -> None:
        """Enqueue one run of the whole graph on ``stream``. See also: cudaGraphLaunch."""
        handle = self._handle
        if handle is None or type(stream) is not Stream or stream.device is not self.device:
            self._stream_handle(stream, "launch")
        if stream._capture is not None or stream.legacy:
            self._guard_capture(stream)
        self._launch(handle, stream._handle)

    def _guard_capture(self, stream: Stream) -> None:
        stream._guard("GraphExec.launch")
        if stream._capture is not None and self.graph._memory:
            from ._capture import _invalidate
            raise _invalidate([stream._capture], "GraphExec.launch", "a graph with allocation or free nodes "
                              "cannot be launched into a capture (it would become a child graph)")

    def upload(self, stream: Stream) -> None:
        """Prepare the graph's device resources ahead of its first launch. See also: cudaGraphUpload."""
        self._backend.exec_upload(self._handle, self._stream_handle(stream, "upload"))

    def close(self) -> None:
        """Release the executable graph; launching it afterwards raises GraphError. Idempotent."""
        if self._handle is not None:
            self._handle = None
            self._finalizer()
            self.graph._live_execs.discard(self)

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._handle is None

    def __enter__(self) -> "GraphExec":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"{len(self.graph)} nodes"
        return f"GraphExec({state}, device={self.device})"
