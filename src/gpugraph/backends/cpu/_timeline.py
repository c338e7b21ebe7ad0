"""Timelines on the CPU backend (``gpugraph._timeline``): while one records a device, each stream operation launched
on it and each node of each graph launched on it is timed by the thread that runs it.

A launch decides whether it is recorded (``RECORDING``: one check; empty while no timeline records), so a graph run
is recorded whole or not at all: a recorded launch runs its plan with timed steps (``timed``), and the runs inside it
(a child graph's, a conditional body's, a graph its kernel launches) are recorded as part of it (the executor's
``run_recorded``); a launch that is not recorded runs as it would with no timeline at all. A node is named by the
front end's node that the executable graph's is a copy of: each copy an executable graph runs, a child graph's or a
body's too, is keyed by those (``key_like``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from ..._nodes import (
    ChildGraphParams,
    ConditionalParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemsetParams,
    NodeKind,
)
from .._protocol import TimelineRecord
from ._graphs import CpuGraph
from ._plan import Step

# The recording of each device that a timeline records (device index -> CpuRecording): empty while none records.
RECORDING: dict[int, CpuRecording] = {}

# .name: what this thread is, as a timeline's lane ("stream 3", "worker 2"), set by the threads that run streams'
# work and graph branches (``_streams``); another thread is named by its thread name.
lanes = threading.local()

Watch = tuple["CpuRecording", "int | None"]  # (recording, launch number; None for a stream operation)


class CpuRecording:
    """One timeline's recording of a device: its records, timed from its start (``time.perf_counter_ns``)."""

    __slots__ = ("index", "origin", "records", "_launches")

    def __init__(self, index: int) -> None:
        self.index = index
        self.origin = time.perf_counter_ns()
        self.records: list[TimelineRecord] = []  # (list.append is atomic: threads add without a lock)
        self._launches = itertools.count(1)

    def next_launch(self) -> int:
        """The number of a graph launch recorded now (1, 2, ...)."""
        return next(self._launches)


def start(index: int) -> CpuRecording:
    """Record device ``index`` from now on (the front end has seen that no timeline records it)."""
    recording = RECORDING[index] = CpuRecording(index)
    return recording


def end(recording: CpuRecording) -> None:
    """Record no launch from now on (what was launched while recording goes on adding its records as it runs)."""
    if RECORDING.get(recording.index) is recording:
        del RECORDING[recording.index]


def launch_watch(index: int) -> Watch | None:
    """What a graph launch on device ``index`` is recorded under, (recording, launch number), or None where no
    timeline records it."""
    recording = RECORDING.get(index)
    return None if recording is None else (recording, recording.next_launch())


def timed_op(index: int, kind: NodeKind, what: object, fn: Callable[..., Any], args: tuple) -> Step:
    """The task of a stream operation of device ``index`` of ``kind`` (its name from ``what``: a Kernel, a host
    function, a byte count): ``fn(*args)``, timed if a timeline records the device."""
    recording = RECORDING.get(index)
    if recording is None:
        return fn, args
    return _run_timed, (recording, None, kind.value, _name(what), None, None, fn, args)


def timed(watch: Watch, params: KernelParams | MemcpyParams | MemsetParams | HostParams, graph_exec: object,
          node: object, step: Step) -> Step:
    """``step``, the work of a kernel, copy, memset or host node of parameters ``params``, timed as part of the
    recorded launch ``watch``: a node named by ``node`` (the handle the front end knows it by, or None) of
    ``graph_exec`` (the executable graph the front end launched)."""
    fn, args = step
    return _run_timed, (watch[0], watch[1], params.kind.value, _node_name(params), graph_exec, node, fn, args)


def key_like(copy: CpuGraph, graph: CpuGraph) -> None:
    """Key ``copy`` (a copy of ``graph``, or a graph of its shape that an update or setter put in its place) as
    ``graph`` is keyed, and the graphs inside it as those inside ``graph``: ``clone_of`` maps the front end's node that
    ``graph``'s node at the same place (in creation order, as CUDA numbers nodes) is a copy of to ``copy``'s node, so
    that a timeline names each node the executable graph runs by the front end's node it is a copy of."""
    pairs = list(zip(graph.nodes, copy.nodes)) if len(graph.nodes) == len(copy.nodes) else []
    pairs = [(old, new) for old, new in pairs if old.params.kind is new.params.kind]
    of = {node: original for original, node in graph.clone_of.items()}
    copy.clone_of = {of[old]: new for old, new in pairs if old in of}
    for old, new in pairs:
        for inner_old, inner_new in zip(_inside(old.params), _inside(new.params)):
            key_like(inner_new, inner_old)


def _inside(params: object) -> tuple[CpuGraph, ...]:
    """The graphs a node of parameters ``params`` embeds: a child graph, a conditional node's bodies."""
    if isinstance(params, ChildGraphParams):
        return (params.graph,)
    if isinstance(params, ConditionalParams):
        return tuple(params.bodies)
    return ()


def _run_timed(recording: CpuRecording, launch: int | None, kind: str, name: str, graph_exec: object, node: object,
               fn: Callable[..., Any], args: tuple) -> None:
    """Run ``fn(*args)`` (the work of ``node``, or a stream operation's), noting when it ran."""
    start = time.perf_counter_ns()
    try:
        fn(*args)
    finally:
        end = time.perf_counter_ns()
        lane = getattr(lanes, "name", None) or threading.current_thread().name
        recording.records.append(TimelineRecord(kind, name, start - recording.origin, end - recording.origin, lane,
                                                launch, graph_exec, node))


def _node_name(params: KernelParams | MemcpyParams | MemsetParams | HostParams) -> str:
    if isinstance(params, KernelParams):
        return _name(params.kernel)
    if isinstance(params, MemcpyParams):
        return _name(params.nbytes)
    if isinstance(params, MemsetParams):
        return _name(params.count * params.element_size * params.height)
    return _name(params.fn)


def _name(what: object) -> str:
    """A kernel's name, a host function's qualified name, or a byte count as "4096 B"."""
    if isinstance(what, int):
        return f"{what} B"
    name = getattr(what, "name", None)  # (a Kernel's)
    if isinstance(name, str):
        return name
    return getattr(what, "__qualname__", None) or getattr(what, "__name__", None) or repr(what)
