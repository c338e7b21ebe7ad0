"""Timelines: when each graph node and stream operation ran. ``gg.timeline(device)`` opens one; while it is open the
backend records the work launched on the device (``Backend.timeline_start`` / ``timeline_stop``: the CPU backend's
executor times each step, CUDA's CUPTI activity records), and this module turns the records into rows naming
gpugraph's Nodes, a table and a Chrome trace (the JSON that Perfetto and chrome://tracing load)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, NamedTuple

from ._device import Device
from ._errors import GpuGraphError
from ._exec import GraphExec
from ._exec_state import executable_of, executables, timeline_nodes
from ._graph_node import handle_of, number_of
from ._host_threads import refuse_in_host_function
from ._nodes import NodeKind
from .backends import get_backend
from .backends._protocol import TimelineRecord

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+

    from ._graph import Graph
    from ._graph_node import Node

_lock = threading.Lock()
_recording: dict[str, Timeline] = {}  # backend name -> the timeline recording on it (one at a time)


class TimelineRow(NamedTuple):
    """One piece of work a timeline recorded: a graph node's run or a stream operation."""

    node: Node | None
    """The graph's Node that ran (of the graph the executable graph was instantiated from, or of a child graph or
    conditional body in it); None for a stream operation, or where gpugraph cannot tell (see the guide)."""
    kind: str
    """What ran, as a NodeKind's value: ``"kernel"``, ``"memcpy"``, ``"memset"`` or ``"host"``."""
    name: str
    """The kernel's or host function's name, or a copy's or memset's bytes (``"4096 B"``)."""
    start_us: float
    """When it started, in microseconds since the timeline began."""
    duration_us: float
    """How long it ran, in microseconds."""
    lane: str
    """What ran it: a CUDA stream (``"stream 13"``, CUPTI's number), a CPU stream's thread (``"stream 2"``) or a
    thread of the CPU backend's graph branches (``"worker 3"``). Work of different lanes may overlap."""
    launch: int | None
    """Which graph launch of the timeline ran it (1, 2, ... in the order they started); None for a stream operation."""

    @property
    def end_us(self) -> float:
        """When it ended, in microseconds since the timeline began."""
        return self.start_us + self.duration_us


def timeline(device: Device | None = None) -> Timeline:
    """A timeline of ``device`` (``Device()``'s default when None): use it as a context manager. Every graph launch
    and stream operation launched on the device inside the ``with`` block is recorded: each kernel, copy, memset
    and host function node's (and stream operation's) start and end (on CUDA, CUPTI's records: no host functions).
    After the block, ``rows()``, ``table()``, ``trace()`` and ``write_trace(path)`` give them.

    Raises:
        TypeError: If ``device`` is not a Device.

    Entering the block raises GpuGraphError if a timeline of the backend is recording, the timeline has recorded
    already, or it is entered from a host function; on CUDA ImportError where cupti-python is not installed, and
    GpuGraphError where CUPTI refuses to record (another profiler holds it). A refused timeline records nothing.
    """
    if device is None:
        device = Device()
    elif not isinstance(device, Device):
        raise TypeError(f"gg.timeline(device): expected a Device (or None for the default), got "
                        f"{type(device).__name__} {device!r}")
    return Timeline(device)


class Timeline:
    """What ran on a device while the timeline was open (``gg.timeline(device)``): open it once, with ``with``.

    Leaving the block stops recording launches, waits for the device's work launched so far (as
    ``Device.synchronize`` does, but the errors of that work stay with the streams, for the next synchronize to
    raise), then reads the records.
    """

    def __init__(self, device: Device) -> None:
        """(Made by ``gg.timeline``.)"""
        self.device = device
        self._handle: Any = None  # the backend's recording, while open
        self._state = "new"  # new, recording, done
        self._rows: list[TimelineRow] = []

    def __repr__(self) -> str:
        return f"<Timeline of {self.device}: {self._state}, {len(self._rows)} rows>"

    def __enter__(self) -> Self:
        refuse_in_host_function("gg.timeline")
        if self._state != "new":
            raise GpuGraphError(f"gg.timeline({self.device}): this timeline has recorded already (a timeline records "
                                f"once); make a new one with gg.timeline(device)")
        backend = get_backend(self.device.backend)
        with _lock:
            other = _recording.get(self.device.backend)
            if other is not None:
                raise GpuGraphError(f"gg.timeline({self.device}): the timeline of {other.device} is recording; one "
                                    f"timeline records at a time on a backend (CUDA's CUPTI records for the whole "
                                    f"process): end that one first")
            self._handle = backend.timeline_start(self.device.index)  # (ImportError: nothing started)
            _recording[self.device.backend] = self
            self._state = "recording"
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        # The device's open executable graphs, which the records may name, each with a call giving what names its
        # nodes (read if asked).
        opened = [(handle, functools.partial(timeline_nodes, owner)) for handle, owner in executables()
                  if isinstance(owner, GraphExec) and owner.device is self.device and not owner.closed]
        try:
            records = get_backend(self.device.backend).timeline_stop(self._handle, opened)
        finally:
            with _lock:
                _recording.pop(self.device.backend, None)
            self._handle, self._state = None, "done"
        self._rows = _rows(records)

    def _read(self, what: str) -> list[TimelineRow]:
        if self._state != "done":
            raise GpuGraphError(f"Timeline.{what}: the timeline of {self.device} is "
                                f"{'still recording' if self._state == 'recording' else 'not opened yet'}; read it "
                                f"after its with block (with gg.timeline(device) as tl: ...)")
        return self._rows

    def rows(self) -> list[TimelineRow]:
        """What ran, one row each, in the order it started.

        Raises:
            GpuGraphError: If the timeline has not recorded yet (read it after its ``with`` block).
        """
        return list(self._read("rows"))

    def table(self) -> str:
        """The rows as a text table: start and duration in microseconds, lane, launch, kind, name, node."""
        return _table(self._read("table"))

    def trace(self) -> dict[str, Any]:
        """The rows in Chrome's Trace Event Format (what Perfetto and chrome://tracing load): a complete event
        ("ph": "X", microseconds) each, on a thread ("tid") per lane, work that overlaps within one lane on threads of
        its own (named after the lane: "stream 13 (2)"), and metadata events ("ph": "M") naming the process (the
        device) and each thread."""
        return _trace(self._read("trace"), str(self.device))

    def write_trace(self, path: str | os.PathLike[str]) -> None:
        """Write ``trace()`` as JSON to the file ``path`` (open it in https://ui.perfetto.dev): whole or not at all (it
        is written beside it first, then takes its name).

        Raises:
            TypeError: If ``path`` is not a str or path.
            OSError: If the file cannot be written (its ``filename`` is ``path``, its message says what failed); a
                file that was at ``path`` is left as it was.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"Timeline.write_trace(path): expected a str or path, got {type(path).__name__} {path!r}")
        text = json.dumps(self.trace())
        target = os.fspath(path)
        written = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"  # (beside it: os.replace stays on one disk)
        made = False
        try:
            try:
                with open(written, "x", encoding="utf-8") as file:
                    made = True
                    file.write(text)
                os.replace(written, target)
            except BaseException:
                if made:  # (no part of a trace is left behind)
                    with contextlib.suppress(FileNotFoundError):  # (renamed already: nothing to remove)
                        os.remove(written)
                raise
        except OSError as error:
            raise type(error)(error.errno, f"Timeline.write_trace: cannot write the trace ({error.strerror})",
                              target) from error


def _rows(records: Iterable[TimelineRecord]) -> list[TimelineRow]:
    """The rows of ``records``, in the order they started, their nodes found and launches numbered in order."""
    records = sorted(records, key=lambda r: (r.start, r.end))
    launches: dict[int, int] = {}
    for record in records:
        if record.launch is not None and record.launch not in launches:
            launches[record.launch] = len(launches) + 1
    nodes = _Nodes()
    return [TimelineRow(nodes.find(r.graph_exec, r.node, r.number), r.kind, r.name, r.start / 1e3,
                        (r.end - r.start) / 1e3, r.lane, None if r.launch is None else launches[r.launch])
            for r in records]


class _Nodes:
    """The Nodes that records name by backend handles, found in the graphs executable graphs were instantiated from,
    their child graphs and conditional bodies (each graph's nodes read once)."""

    def __init__(self) -> None:
        self._of: dict[Any, Node] = {}  # backend handle -> Node, of the graphs read so far
        self._read: set[int] = set()  # (ids of) the executable graphs whose graphs are read

    def find(self, graph_exec: object, handle: object, number: int | None) -> Node | None:
        """The Node of backend handle ``handle`` in the graph ``graph_exec`` (a backend handle, or None: any live
        executable graph's) was instantiated from, or in a graph inside it; None if none has it (gone meanwhile), or
        if the one that has it now is not numbered ``number`` (added since, with a removed node's handle)."""
        if handle is None:
            return None
        node = self._of.get(handle)
        if node is None:
            owners = [executable_of(graph_exec)] if graph_exec is not None else [owner for _, owner in executables()]
            for owner in owners:
                if owner is not None and id(owner) not in self._read:
                    self._read.add(id(owner))
                    self._note([owner.graph])
            node = self._of.get(handle)
        return None if node is None or number not in (None, number_of(node)) else node

    def _note(self, graphs: list[Graph]) -> None:
        for graph in graphs:  # (a list that grows: the graphs inside are read in turn)
            for node in graph.nodes:
                self._of[handle_of(node)] = node
                graphs.extend(_inside(node))


def _inside(node: Node) -> tuple[Graph, ...]:
    """The graphs a node embeds: a child-graph node's graph, a conditional node's bodies."""
    if node.kind is NodeKind.GRAPH:
        return (node.params.graph,)
    if node.kind is NodeKind.CONDITIONAL:
        return node.bodies
    return ()


def _table(rows: list[TimelineRow]) -> str:
    header = ("start (us)", "duration (us)", "lane", "launch", "kind", "name", "node")
    cells = [header] + [(f"{r.start_us:.3f}", f"{r.duration_us:.3f}", r.lane, "-" if r.launch is None else
                         str(r.launch), r.kind, r.name, "-" if r.node is None else repr(r.node)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    right = {0, 1, 3}  # (numbers line up on the right)
    return "\n".join("  ".join(cell.rjust(w) if i in right else cell.ljust(w)
                               for i, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in cells) + "\n"


def _trace(rows: list[TimelineRow], device: str) -> dict[str, Any]:
    """Chrome's Trace Event Format of ``rows``: one process (the device), a thread per track."""
    tracks: list[tuple[str, float]] = []  # (lane, end of its last event), in the order first used
    events: list[dict[str, Any]] = []
    for row in rows:  # (in the order they started: each goes to the first track of its lane that is free by then)
        tid = next((i for i, (lane, end) in enumerate(tracks) if lane == row.lane and end <= row.start_us),
                   len(tracks))
        if tid == len(tracks):
            tracks.append((row.lane, row.end_us))
        else:
            tracks[tid] = (row.lane, row.end_us)
        args: dict[str, Any] = {"lane": row.lane}
        if row.node is not None:
            args["node"] = repr(row.node)
        if row.launch is not None:
            args["launch"] = row.launch
        events.append({"name": row.name, "cat": row.kind, "ph": "X", "ts": row.start_us, "dur": row.duration_us,
                       "pid": 1, "tid": tid + 1, "args": args})
    meta: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
                                   "args": {"name": f"gpugraph {device}"}}]
    seen: dict[str, int] = {}
    for tid, (lane, _) in enumerate(tracks):
        seen[lane] = seen.get(lane, 0) + 1
        label = lane if seen[lane] == 1 else f"{lane} ({seen[lane]})"
        meta.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid + 1, "args": {"name": label}})
        meta.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid + 1, "args": {"sort_index": tid + 1}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ms"}
