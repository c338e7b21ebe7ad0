"""Stream capture: the Capture context manager. The rules of which calls a running capture forbids are in
gpugraph._capture_rules.

Beginning and ending a capture are all or nothing, whatever exception stops them (KeyboardInterrupt
included): the backend never records work the front end does not know is captured, and a capture is
either complete or discarded, never left running (see ``Capture._recover``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from . import _capture_rules, _graph_reads, _interrupts
from ._capture_rules import check_mode, check_usable, invalidate, user_stack
from ._conditions import Condition
from ._errors import CaptureError, GraphError
from ._interrupts import guard_interrupts, release_interrupts, without_interrupts
from ._kernel import Kernel
from ._nodes import DEPENDENCY_KINDS, NodeKind
from ._placement import load_kernel

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

    from ._graph import Graph
    from ._stream import Stream

# The Graph type, which a capture records into and makes. A Graph sits above captures (its methods apply the
# capture rules), so gpugraph._graph sets this when it is imported, and this module imports nothing above it.
graph_type: Any = None


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

    def __init__(self, stream: Stream, mode: str, into: object, after: Any) -> None:
        check_mode(mode, "capture")
        if into is not None and not isinstance(into, graph_type):
            raise TypeError(f"capture(into): expected a Graph or None, got {type(into).__name__}")
        if into is not None and into.device is not stream.device:
            raise ValueError(f"capture(into): the graph is on {into.device}, the stream on {stream.device}")
        self.stream = stream
        self.mode = mode
        # The stream's backend, read once here (_stream sits above this module): every backend call below, the
        # per-node ones included, goes through it.
        self._backend = stream._backend
        self.graph = into
        self._into = into
        # (Graph's own static check of after=, through the hook above: Node's class sits above this module.)
        self._after = graph_type._as_nodes(after, "capture")
        if self._after and into is None:
            raise ValueError("capture(after): starting dependencies need into=graph")
        self.thread = threading.get_ident()
        self.streams: list[Any] = []
        self.error: CaptureError | None = None
        self.active = False
        self.allocations: list[Any] = []  # Arrays allocated on its streams: graph memory
        self._handle: Any = None  # the backend's record of it, passed with every call of its streams
        self._nodes_before: set[Any] = set()
        self._recorded: Any = None  # the Graph this capture records into, until it has ended
        # Frontiers that set_dependencies replaced: work they held was joined, as CUDA judges a join by
        # what the capturing stream waited on, not by what its final frontier still reaches.
        self._replaced_frontiers: list[Any] = []
        # set_dependencies gave the frontier an edge kind other than "full", which only a kernel may take:
        # until the stream's next captured work, its other calls ask the backend whether one is still there.
        self._kinded = False
        self._discarding = False  # a discard began: a way out interrupted midway ends in a discard
        self._owned = False  # the captured graph was handed to its Graph (which destroys it when collected)
        self._outcome: str | None = None  # "complete" or "discarded" once the capture has ended

    # Entering and leaving

    def _refuse_to_begin(self) -> None:
        """Raise CaptureError if this capture cannot begin: on a capturing stream (which invalidates that stream's
        capture, as every call a capture refuses does), used already, or on the legacy stream."""
        stream = self.stream
        running = stream.active_capture
        if running is not None:
            raise invalidate([running], "Stream.capture", f"{stream!r} is already capturing; captures cannot nest "
                                                          f"on one stream", "end it first, or begin this capture on "
                                                          "another stream")
        if self.active or self.streams or self._outcome is not None:
            why = "this Capture was used already; call stream.capture() again"
        elif stream.legacy:
            why = "the legacy default stream cannot be captured; use Device.stream()"
        else:
            return
        raise CaptureError(f"capture: {why}", api="Stream.capture", stream=stream, mode=self.mode,
                           where=user_stack())

    def __enter__(self) -> Self:
        self._refuse_to_begin()
        stream = self.stream
        backend = self._backend
        into = self._into
        after = _graph_reads.nodes_of(into, self._after, "capture") if into is not None else []
        if into is not None:
            self._nodes_before = _graph_reads.before_capture(into, after)
        deps = [node._handle for node in after]
        try:
            guard_interrupts(self)
            # Begun and noted together (see unsafe_section); a change of ``into`` on another thread comes
            # before or after, so that the backend knows which of its nodes the capture did not make.
            with _capture_rules.lock, _graph_reads.lock(into) if into is not None else contextlib.nullcontext():
                if into is not None:  # from now on the backend may add to it: read again when asked
                    self._recorded = into
                    _graph_reads.begin_recording(into)
                # The backend's record first, then the begin: whatever interrupts the begin, the front end
                # holds the record it asks whether the backend still captures (_recover, _discard).
                self._handle = backend.capture_create(stream._handle, self.mode,
                                                      None if into is None else _graph_reads.handle(into))
                handle = backend.capture_begin(self._handle, deps)
                if into is None:
                    # (Graph's own constructor over a backend graph, through the hook above: Graph sits above.)
                    self.graph = self._recorded = graph_type._wrap(stream.device, handle, own=False, recording=True)
                self.active = True
                self._join(stream)
                _capture_rules.active.append(self)
        except BaseException:
            # Whatever was interrupted (KeyboardInterrupt included), the backend must not go on recording
            # work the front end does not know is captured: end the capture wherever it got to.
            try:
                self._discard()
            finally:
                release_interrupts(self)
            raise
        return self

    def _join(self, stream: Stream) -> None:
        # (A stream's link to its capture is set and cleared only here and in _finish, under _capture_rules.lock:
        # a StreamState field, which the compiled launch reads, that no module below _stream can set otherwise.)
        stream._capture = self
        self.streams.append(stream)

    def _finish(self) -> None:
        """The front end's part of ending: no stream records into this capture any more. Idempotent."""
        # (A stream forking in on another thread meanwhile comes before, or finds it inactive.)
        with _capture_rules.lock:
            self.active = False
            for stream in self.streams:
                if stream.active_capture is self:
                    stream._capture = None  # (StreamState's link, as _join sets it)
        graph, self._recorded = self._recorded, None
        if graph is not None:  # the backend records no more into it: read it whole once more, then no more
            _graph_reads.end_recording(graph)
        with _capture_rules.lock:
            if self in _capture_rules.active:
                _capture_rules.active.remove(self)
                _capture_rules.ended.notify_all()

    # Every way out of a capture ends in _discard or _complete. Both can run again, so that when an exception
    # (KeyboardInterrupt) stops one of them, or the steps before them, _recover finishes the way out from the
    # state the backend is really in: a capture is either discarded or complete, never left running.

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        try:
            return self._exit(exc_type is not None)
        except BaseException:
            self._recover()
            raise
        finally:
            release_interrupts(self)

    def _exit(self, failed: bool) -> Literal[False]:
        if failed or self.error is not None:
            self._discard()
            error = self.error
            if not failed and error is not None:  # the capture's own error, not the user's
                raise CaptureError(str(error).split("\nThe offending call")[0], api=error.api,
                                   stream=error.stream, mode=error.mode, where=error.where)
            return False  # the user's own exception propagates
        unjoined = self._unjoined_streams()
        if unjoined:
            self._discard()
            names = ", ".join(repr(s) for s in unjoined)
            raise CaptureError(f"capture end: {names} forked from the capture through an event but its work "
                               f"was not joined back into {self.stream!r} (record an event on it and "
                               f"wait for that event on the capturing stream)", api="Stream.capture (end)",
                               stream=self.stream, mode=self.mode)
        try:
            self._backend.capture_end(self._handle)
        except CaptureError as error:
            self._discard()
            raise CaptureError(str(error), api="Stream.capture (end)", stream=self.stream,
                               mode=self.mode, where=user_stack()) from None
        self._complete()
        return False

    def _recover(self) -> None:
        """After an exception on the way out: end as the backend's state says, if not ended yet."""
        if self._outcome is not None:
            return
        if self._discarding or self._backend_captures():
            self._discard()
        else:  # the backend ended the capture: its graph is complete
            self._complete()

    def _complete(self) -> None:
        """The capture ended in the backend: finish the front end's part and hand the graph over."""
        self._finish()
        if self._into is None and not self._owned:
            self._owned = True  # before: a second _complete must not give the graph a second owner
            _graph_reads.take(self.graph)
        _graph_reads.refresh(self.graph)
        self._outcome = "complete"

    def _backend_captures(self) -> bool:
        """Whether the backend still records into this capture (the truth the front end's bookkeeping is mended
        from after an interrupted begin or end)."""
        return self._handle is not None and self._backend.capture_active(self._handle)

    def _unjoined_streams(self) -> list[Any]:
        """Streams forked into the capture whose last work the capturing stream never waited for.

        A forked stream is joined when every node of its frontier was, at some time, in the capturing
        stream's frontier or before a node that was: a join stays a join after ``set_dependencies``
        moves the frontier on (CUDA's rule, measured: tools/probes/gpu_probe_rules.py, cases 1a-1i).
        """
        if len(self.streams) <= 1:
            return []  # nothing was forked: no walk through the graph
        backend = self._backend
        topology = _graph_reads.topology(self.graph)  # read once (the capture records into it), then walked here
        position = topology.position
        joined: set[int] = set()
        frontier = backend.capture_dependencies(self._handle, self.stream._handle) + self._replaced_frontiers
        pending = [position[h] for h in frontier if h in position]
        while pending:
            i = pending.pop()
            if i not in joined:
                joined.add(i)
                pending.extend(topology.deps_of(i))
        return [s for s in self.streams[1:]
                if any(position[h] not in joined for h in backend.capture_dependencies(self._handle, s._handle))]

    def _join_forks(self) -> None:
        """Make the capturing stream wait for every forked stream, as a clean end of capture needs."""
        backend, origin = self._backend, self.stream
        for stream in self._unjoined_streams():
            event = backend.event_create(stream.device.index, False)  # (recorded on its own device's stream)
            backend.event_record(event, stream._handle, self._handle)
            backend.stream_wait_event(origin._handle, event, self._handle)
            backend.event_destroy(event)

    def _discard(self) -> None:
        """End the capture if the backend still records it, discard what it recorded, and leave an ``into``
        graph as it was. Idempotent (see _recover); the front end lets go of the streams only once the
        backend has."""
        self._discarding = True
        backend = self._backend
        if self._backend_captures():
            try:
                self._join_forks()
            finally:
                backend.capture_abort(self._handle)
        self._finish()
        if self._into is not None:
            into = _graph_reads.handle(self._into)
            for handle in backend.graph_nodes(into):
                if handle not in self._nodes_before:
                    backend.graph_destroy_node(into, handle)
            _graph_reads.refresh(self._into)
        self.graph = None
        self._outcome = "discarded"

    # The combined approach

    @property
    def id(self) -> int:
        """The capture's id, unique among this process's captures (cudaStreamGetCaptureInfo's ``id_out``); it stays
        readable after the capture has ended.

        Raises:
            CaptureError: If the capture has not begun (``with stream.capture() as cap`` begins it).
        """
        if self._handle is None or not (self.active or self._outcome is not None):
            raise CaptureError("Capture.id: the capture has not begun", api="Capture.id", stream=self.stream,
                               mode=self.mode, where=user_stack())
        return self._backend.capture_id(self._handle)

    @property
    def dependencies(self) -> tuple[Any, ...]:
        """The capture frontier of the stream: the nodes the next captured work will depend on.

        See also: cudaStreamGetCaptureInfo.
        """
        self._check_active("dependencies")
        backend = self._backend
        graph = self.graph
        return tuple(_graph_reads.node_of(graph, h) for h in backend.capture_dependencies(self._handle,
                                                                                            self.stream._handle))

    @property
    def dependency_kinds(self) -> tuple[str, ...]:
        """The kind (of ``gpugraph.DEPENDENCY_KINDS``) of the edge the next captured work gets from each node of
        ``dependencies``, in its order: "full" unless ``set_dependencies(kinds=...)`` said otherwise.

        See also: cudaStreamGetCaptureInfo (its edge data).
        """
        self._check_active("dependency_kinds")
        return tuple(self._backend.capture_dependency_kinds(self._handle, self.stream._handle))

    def set_dependencies(self, nodes: Any, kinds: Any = "full") -> None:
        """Replace the stream's capture frontier with ``nodes`` (nodes of ``cap.graph``).

        ``kinds`` gives the edges the next captured work gets from them (see ``Graph.add_dependency``): one kind
        for all, or a sequence of one kind per node. A "programmatic" or "launch_order" edge leaves a kernel
        node and enters a kernel node: the next work captured on the stream must then be a kernel launch
        (``Stream.launch`` or ``add_kernel``); other work is refused at its call.

        Raises:
            TypeError: If ``kinds`` is neither a str nor a list or tuple.
            ValueError: If a kind is not one of DEPENDENCY_KINDS, or ``kinds`` has not one kind per node.
            GraphError: If a node is not the capture graph's, or an edge of another kind than "full" would leave
                a node that is not a kernel node.

        See also: cudaStreamUpdateCaptureDependencies (cudaStreamSetCaptureDependencies, its edge data).
        """
        self._check_active("set_dependencies")
        after = _graph_reads.nodes_of(self.graph, nodes, "set_dependencies")
        per_node = self._checked_kinds(after, kinds)
        _graph_reads.locate(self.graph, after, "set_dependencies")
        deps = [node._handle for node in after]
        backend = self._backend
        self._replaced_frontiers.extend(backend.capture_dependencies(self._handle, self.stream._handle))
        backend.capture_set_dependencies(self._handle, self.stream._handle, deps, per_node)
        self._kinded = per_node is not None

    @staticmethod
    def _checked_kinds(after: list[Any], kinds: Any) -> list[str] | None:
        """One kind per node of ``after`` from ``kinds`` (checked), or None where every edge is full."""
        if isinstance(kinds, str):
            per_node = [kinds] * len(after)
        elif isinstance(kinds, (list, tuple)):
            per_node = list(kinds)
        else:
            raise TypeError(f"set_dependencies(kinds): expected a kind or a list of kinds, one per node, got "
                            f"{type(kinds).__name__}")
        if len(per_node) != len(after):
            raise ValueError(f"set_dependencies(kinds): expected one kind per node ({len(after)}), "
                             f"got {len(per_node)}")
        for node, kind in zip(after, per_node):
            if kind not in DEPENDENCY_KINDS:
                raise ValueError(f"set_dependencies(kinds): expected one of {', '.join(DEPENDENCY_KINDS)}, "
                                 f"got {kind!r}")
            if kind != "full" and node.kind is not NodeKind.KERNEL:
                raise GraphError(f"set_dependencies({node!r}, kinds={kind!r}): a {kind} edge leaves a kernel node; "
                                 f"got a {node.kind.value} node")
        return None if all(kind == "full" for kind in per_node) else per_node

    def _append(self, api: str, *args: Any, **kwargs: Any) -> Any:
        """Add a node by the graph's method ``api`` at the frontier and advance it."""
        self._check_active(api)
        add = getattr(self.graph, api)  # (once running: before the capture begins there is no graph)
        if api != "add_kernel":
            refuse_kinded_frontier(self, f"Capture.{api}")
        deps = self.dependencies
        kinds = self.dependency_kinds if self._kinded else ()
        backend = self._backend
        if any(kind != "full" for kind in kinds):
            if api == "add_kernel" and type(args[0]) is Kernel:  # (compiled first: Ctrl-C is held back below)
                load_kernel(self.graph.device, args[0])
            made: list[Any] = []

            def add_kinded() -> None:
                node = add(*args, after=[d for d, kind in zip(deps, kinds) if kind == "full"], **kwargs)
                made.append(node)
                kinded = [dep for dep, kind in zip(deps, kinds) if kind != "full"]
                try:
                    for dep, kind in zip(deps, kinds):
                        if kind != "full":
                            self.graph.add_dependency(dep, node, kind)
                            kinded.remove(dep)
                except Exception:
                    # CUDA cannot take a node out of a graph being captured: it waits for the rest fully, a
                    # stronger order than each kind asks, and joins the frontier before the error goes on.
                    try:
                        for dep in kinded:
                            self.graph.add_dependency(dep, node)
                    finally:
                        self._kinded = False
                        backend.capture_set_dependencies(self._handle, self.stream._handle, [node._handle])
                    raise
                self._kinded = False
                backend.capture_set_dependencies(self._handle, self.stream._handle, [node._handle])
            # The node, its edges and the frontier's move come whole: a Ctrl-C between them would leave it half
            # joined (it is raised after them).
            without_interrupts(add_kinded)
            return made[0]
        node = add(*args, after=deps, **kwargs)
        self._kinded = False
        try:
            backend.capture_set_dependencies(self._handle, self.stream._handle, [node._handle])
        except BaseException:
            # The node is in the graph and would run there off the frontier; CUDA cannot take a node out of
            # a graph being captured (cuGraphDestroyNode: CUDA_ERROR_ILLEGAL_STATE on the H200), so the
            # frontier move is made again, whole, and the interrupt goes on.
            backend.capture_set_dependencies(self._handle, self.stream._handle, [node._handle])
            raise
        return node

    def add_kernel(self, kernel: Kernel, grid: Any, block: Any, *args: Any, shared_mem: int = 0) -> Any:
        """Add a kernel node at the frontier and advance it (see ``Graph.add_kernel``)."""
        return self._append("add_kernel", kernel, grid, block, *args, shared_mem=shared_mem)

    def add_memcpy(self, dst: Any, src: Any, nbytes: int | None = None) -> Any:
        """Add a copy node at the frontier and advance it (see ``Graph.add_memcpy``)."""
        return self._append("add_memcpy", dst, src, nbytes)

    def add_memset(self, dst: Any, value: Any, count: int | None = None) -> Any:
        """Add a memset node at the frontier and advance it (see ``Graph.add_memset``)."""
        return self._append("add_memset", dst, value, count)

    def add_host(self, fn: Callable[..., Any], *args: Any, reads: object = None, writes: object = None) -> Any:
        """Add a host node at the frontier and advance it (see ``Graph.add_host``, which ``reads`` and ``writes``
        declare what it touches for)."""
        return self._append("add_host", fn, *args, reads=reads, writes=writes)

    def add_child(self, graph: Graph) -> Any:
        """Add a child-graph node at the frontier and advance it (see ``Graph.add_child``)."""
        return self._append("add_child", graph)

    def add_empty(self) -> Any:
        """Add an empty node at the frontier and advance it (see ``Graph.add_empty``)."""
        return self._append("add_empty")

    # Conditional nodes: added at the frontier as explicit nodes (as CUDA's captures add them, with
    # cudaStreamGetCaptureInfo, cudaGraphAddNode and cudaStreamUpdateCaptureDependencies); their bodies are
    # filled through ``node.bodies``.

    def condition(self, default: int = 0, reset: bool = True) -> Any:
        """A new Condition of the graph being captured (see ``Graph.condition``)."""
        self._check_active("condition")
        return self.graph.condition(default, reset)

    def add_if(self, condition: Condition, has_else: bool = False) -> Any:
        """Add an IF node at the frontier and advance it (see ``Graph.add_if``)."""
        return self._append("add_if", condition, has_else)

    def add_while(self, condition: Condition) -> Any:
        """Add a WHILE node at the frontier and advance it (see ``Graph.add_while``)."""
        return self._append("add_while", condition)

    def add_switch(self, condition: Condition, count: int) -> Any:
        """Add a SWITCH node at the frontier and advance it (see ``Graph.add_switch``)."""
        return self._append("add_switch", condition, count)

    def _check_active(self, api: str) -> None:
        if not self.active:
            raise CaptureError(f"Capture.{api}: the capture is not running (use it inside the with block)",
                               api=f"Capture.{api}", stream=self.stream, mode=self.mode)
        check_usable(self, f"Capture.{api}")

    def __repr__(self) -> str:
        state = "active" if self.active else "ended"
        return f"Capture({self.stream!r}, mode={self.mode!r}, {state})"


_interrupts.ways_out.append(Capture.__exit__.__code__)  # its entry is held back (see _interrupts)


# What a stream does to the capture it records into (gpugraph._stream's calls: a Capture's fields are its own).


def fork(capture: Capture, stream: Stream) -> None:
    """``stream`` waited for an event of ``capture``: it records into the capture from now on, unless the capture
    has ended meanwhile (on another thread; ``Capture._finish`` holds the same lock)."""
    with _capture_rules.lock:
        if capture.active:
            capture._join(stream)


def refuse_kinded_frontier(capture: Capture, api: str) -> None:
    """Refuse work other than a kernel while ``capture``'s frontier carries an edge kind only a kernel may take."""
    if not capture._kinded:  # (set_dependencies gave it none: the common case)
        return
    kinds = capture._backend.capture_dependency_kinds(capture._handle, capture.stream._handle)
    kind = next((k for k in kinds if k != "full"), None)
    if kind is None:
        capture._kinded = False  # (a kernel took the kinds)
        return
    raise CaptureError(f"{api}: the capture frontier carries a {kind} edge (set_dependencies(kinds=...)), "
                       f"which only a kernel node may take; capture a kernel launch next, or set the "
                       f"dependencies again", api=api, stream=capture.stream, mode=capture.mode)


def refuse_in_body(capture: Capture, api: str, kind: str) -> None:
    """Refuse work that would add a node of ``kind`` to the conditional node's body ``capture`` captures into."""
    if capture._into is not None:  # (the Graph's own rule: a stream's captured work meets it per node)
        _graph_reads.refuse_in_body(capture._into, api, kind)
