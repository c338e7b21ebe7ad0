"""Timelines on the CPU backend (``gpugraph._timeline``): while one records a device, each stream operation launched
on it and each node of each graph launched on it is timed by the thread that runs it.

A launch decides whether it is recorded (``RECORDING``: one check; empty while no timeline records), so a graph run
is recorded whole or not at all. A recorded graph run runs its plan with timed steps (``timed_plan``): every step
of a kernel, copy, memset or host node notes its start and end, and every step marks its thread as running for the
recorded run while it runs, so that the runs inside it (a child graph's, a conditional body's, a graph its kernel
launches) are recorded too (``watched``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from ..._nodes import HostParams, KernelParams, MemcpyParams, MemsetParams, NodeKind
from .._protocol import TimelineRecord
from ._plan import Step

# The recording of each device that a timeline records (device index -> CpuRecording): empty while none records.
RECORDING: dict[int, CpuRecording] = {}

# The kinds of work a timeline times: those CUDA's records have too, and host functions.
TIMED = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.HOST})

# .name: what this thread is, as a timeline's lane ("stream 3", "worker 2"), set by the threads that run streams'
# work and graph branches (``_streams``); another thread is named by its thread name.
lanes = threading.local()

# .run: (recording, launch) of the recorded graph run whose step this thread runs, which the runs inside that step
# (a child graph's, a conditional body's, a graph its kernel launches) are part of.
_watch = threading.local()

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


def stop(recording: CpuRecording) -> list[TimelineRecord]:
    """Record no more (the device's work launched while recording has finished); what was recorded."""
    if RECORDING.get(recording.index) is recording:
        del RECORDING[recording.index]
    return list(recording.records)


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
    return _run_step, ((recording, None), kind.value, _name(what), None, None, fn, args)


def watched() -> Watch | None:
    """The recorded graph run (recording, launch) whose step this thread runs, else None."""
    return getattr(_watch, "run", None)


def run_watched(watch: Watch, fn: Callable[..., Any], *args: object) -> None:
    """``fn(*args)`` as part of the recorded run ``watch``: a launch's run, with what it runs."""
    previous, _watch.run = getattr(_watch, "run", None), watch
    try:
        fn(*args)
    finally:
        _watch.run = previous


def timed_plan(steps: list[list[Step]], where: dict[Any, tuple[int, int]], origins: dict[Any, Any],
               graph_exec: object, watch: Watch, skip: Step) -> list[list[Step]]:
    """``steps`` (a plan's, each node's at ``where[node]``) with each step run under ``watch``, those of timed kinds
    timed: a node named by ``origins[node]`` (the handle the front end knows it by), of ``graph_exec`` (the
    executable graph the front end launched). ``skip``, a disabled node's step (it runs nothing), is left as is."""
    timed = [list(chain) for chain in steps]
    for node, (chain, position) in where.items():
        fn, args = step = timed[chain][position]
        if step is not skip:
            params = node.params
            name = _node_name(params) if params.kind in TIMED else None
            timed[chain][position] = (_run_step, (watch, params.kind.value, name, graph_exec, origins.get(node), fn,
                                                  args))
    return timed


def _run_step(watch: Watch, kind: str, name: str | None, graph_exec: object, node: object, fn: Callable[..., Any],
              args: tuple) -> None:
    """Run ``fn(*args)`` (the work of ``node``, or a stream operation's) as part of ``watch``; if ``name`` is given
    (a timed kind), note when it ran."""
    previous, _watch.run = getattr(_watch, "run", None), watch
    start = time.perf_counter_ns()
    try:
        fn(*args)
    finally:
        end = time.perf_counter_ns()
        _watch.run = previous
        if name is not None:
            recording = watch[0]
            lane = getattr(lanes, "name", None) or threading.current_thread().name
            recording.records.append(TimelineRecord(kind, name, start - recording.origin, end - recording.origin,
                                                    lane, watch[1], graph_exec, node))


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
