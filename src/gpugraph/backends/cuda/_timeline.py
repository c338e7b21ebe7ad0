"""Timelines on CUDA (``gpugraph._timeline``): CUPTI's activity records, read through NVIDIA's cupti-python, of the
kernels, copies and memsets that run while a timeline records, each tied to the graph node that ran it.

CUPTI names a graph node's work by ids (``graphId``, ``graphNodeId``): the executable graph's id
(``cuptiGetGraphExecId``), and the node's number in it (the low 32 bits of ``graphNodeId``), which the driver gives
when it instantiates (measured on CUDA 13.0, an H100 and an H200; ``node_numbers``): a node of the graph
instantiated keeps its number there (its local id: the count of nodes made in that graph before it, removed ones
included); the nodes of the graphs inside (child graphs, conditional bodies) are numbered on from the number the
graph's next node would take, graph after graph in the order of the nodes embedding them, each graph's nodes in
the order they were made (one after another: a child graph is a copy of the nodes it had), and the graphs inside a
graph right after its own nodes. The front end gives the graph as it was instantiated (the executable graph's
snapshot, taken before that graph changed), so nodes removed since still have their numbers, and each record is
checked against the node numbered so (its kind, its kernel): a node of the graph itself that a record does not fit
is left unnamed, and where a record of a node inside does not fit, the nodes inside that executable graph are.

A timeline records the launches made while it is open: the work of kernels, copies and memsets whose correlation id
is that of a driver or runtime call made meanwhile (CUPTI's API records), a conditional body's work (correlation id 0)
with the launch it is part of, and a graph's work that no launch from the host is known for where it began while
recording. (A graph a kernel launched has none: CUPTI 13.0 gives no record of its nodes beside the other graphs'.)

CUPTI keeps one set of activity buffers for the process: a timeline records one device at a time (the front end
sees to it), and this module registers its buffer callbacks once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from cuda.bindings import driver as cu

from ..._errors import GpuGraphError
from ..._nodes import MemsetParams
from .._protocol import TimelineRecord
from ._driver import call
from ._objects import CudaExec
from ._symbols import drv

if TYPE_CHECKING:
    from ..._update import GraphLayout
    from ._graphs import CudaGraphs as CudaBackend  # (the layers below CudaBackend, which imports this module)

INSTALL = ("gg.timeline on CUDA reads CUPTI's activity records through NVIDIA's cupti-python package, which is not "
           "installed: pip install cupti-python (or, in a checkout, pip install \".[timeline]\")")

# CUPTI's activity kinds read, and the kind of work each is ("kernel", ...: a NodeKind's value).
_KINDS = {"CONCURRENT_KERNEL": "kernel", "MEMCPY": "memcpy", "MEMSET": "memset"}
# The API calls', whose correlation ids are those of the launches made while a timeline records.
_CALLS = ("DRIVER", "RUNTIME")
_LOW = 0xFFFFFFFF  # (a graphNodeId's low 32 bits: the node's number in its graph)


def _cupti() -> ModuleType:
    """cupti-python's module; ImportError naming the package where it is missing."""
    try:
        from cupti import cupti  # type: ignore[import-not-found,import-untyped,unused-ignore]  # (optional extra)
    except ImportError as exc:
        raise ImportError(INSTALL) from exc
    return cupti


class _Buffers:
    """The activity records CUPTI has handed back (its buffer callbacks, registered once for the process): the work's,
    the correlation ids of the API calls, and the first exception reading them raised (on CUPTI's thread, where no
    one would see it: the recording's end raises it)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: list[tuple] = []
        self.calls: set[int] = set()
        self.error: BaseException | None = None
        self.cupti: ModuleType | None = None  # (set once the callbacks are registered)

    def register(self, cupti: ModuleType) -> None:
        if self.cupti is None:
            cupti.activity_register_callbacks(self._requested, self._completed)
            self.cupti = cupti

    @staticmethod
    def _requested() -> tuple[int, int]:
        return 8 << 20, 0  # (8 MiB buffers, as many records as fit)

    def _completed(self, activities: list[Any]) -> None:
        try:
            kinds = _cupti().ActivityKind
            taken, calls = [], []
            for a in activities:  # (a record lives as long as its buffer: what is read is copied)
                name = kinds(a.kind).name
                if name in _CALLS:
                    calls.append(a.correlation_id)
                    continue
                kind = _KINDS.get(name)
                if kind is not None:
                    name = a.name if kind == "kernel" else f"{a.bytes} B"
                    taken.append((kind, name, a.start, a.end, a.device_id, a.stream_id, a.correlation_id, a.graph_id,
                                  a.graph_node_id))
        except BaseException as exc:  # noqa: BLE001 - kept, and raised when the recording ends
            with self.lock:
                self.error = self.error or exc
            return
        with self.lock:
            self.records.extend(taken)
            self.calls.update(calls)

    def take(self) -> tuple[list[tuple], set[int], BaseException | None]:
        """The work's records, the API calls' correlation ids and the error kept, now no longer kept."""
        with self.lock:
            taken, calls, error = self.records, self.calls, self.error
            self.records, self.calls, self.error = [], set(), None
        return taken, calls, error


_buffers = _Buffers()


class CudaRecording:
    """One timeline's recording of a device: CUPTI's clock when it began."""

    __slots__ = ("index", "origin")

    def __init__(self, index: int, origin: int) -> None:
        self.index, self.origin = index, origin


def start(index: int) -> CudaRecording:
    """Enable CUPTI's records of kernels, copies, memsets and API calls for device ``index`` from now on: all or
    none (GpuGraphError where CUPTI refuses one)."""
    cupti = _cupti()
    _buffers.register(cupti)
    _buffers.take()  # (none should be left: a recording ends with a flush)
    enabled: list[Any] = []
    name = "any"  # (the kind being enabled, for the message)
    try:
        for name in (*_KINDS, *_CALLS):
            kind = getattr(cupti.ActivityKind, name)
            cupti.activity_enable(kind)
            enabled.append(kind)
        return CudaRecording(index, int(cupti.get_timestamp()))
    except BaseException as exc:
        for kind in enabled:  # (nothing is left recording)
            cupti.activity_disable(kind)
        if not isinstance(exc, Exception):
            raise
        raise GpuGraphError(f"gg.timeline(cuda:{index}): CUPTI refused to record {name} activity ({exc}); CUPTI serves "
                            f"one tool at a time, and another may hold it (Nsight Systems, Nsight Compute or another "
                            f"profiler this process runs under): run without it to record a timeline") from exc


def stop(backend: CudaBackend, recording: CudaRecording, executables: Sequence[tuple[CudaExec, Callable[[], Any]]]
         ) -> list[TimelineRecord]:
    """Wait for device ``recording.index``'s work, flush CUPTI's records and disable them; the records of the work
    launched on that device while recording, graph nodes named by ``executables``' nodes (each with the call giving
    what names them, ``_exec_state.timeline_nodes``: None once closed)."""
    cupti = _cupti()
    try:
        for name in _CALLS:  # first: a launch made from now on (on any thread) is not recorded, not even in part
            cupti.activity_disable(getattr(cupti.ActivityKind, name))
        backend.contexts.use(recording.index)
        # Not through call: the work's error is the streams' to report, at their next synchronize (a sticky one
        # there too), and the records are read all the same.
        drv.ctx_synchronize()
        cupti.activity_flush_all(1)
    finally:
        for name in _KINDS:
            cupti.activity_disable(getattr(cupti.ActivityKind, name))
    taken, calls, error = _buffers.take()
    if error is not None:
        raise GpuGraphError(f"gg.timeline(cuda:{recording.index}): reading CUPTI's activity records failed: "
                            f"{error!r}") from error
    records, launches = made_while_recording([r for r in taken if r[4] == recording.index], calls, recording.origin)
    ran = {r[7] for r in records if r[7]}  # (the executable graphs that ran: their nodes are numbered)
    named = {graph_id: (exe, nodes) for exe, nodes in executables
             if (graph_id := cupti.get_graph_exec_id(int(exe.handle))) in ran}
    numbered = {graph_id: (exe, found) for graph_id, (exe, nodes) in named.items() if (found := nodes()) is not None}
    names = _kernel_names(backend)
    nodes = {graph_id: _fitting(node_numbers(*found),
                                [(r[0], names.get(r[1], r[1]), r[8] & _LOW) for r in records if r[7] == graph_id])
             for graph_id, (_, found) in numbered.items()}
    made = []
    for (kind, name, begin, end, _, stream, _, graph_id, node_id), launch in zip(records, launches):
        exe, _ = numbered.get(graph_id, (None, None))
        node, params, number = nodes[graph_id].get(node_id & _LOW, (None, None, None)) if exe is not None else (
            None, None, None)
        name = names.get(name, name) if kind == "kernel" else name
        if kind == "kernel" and params is not None and params.kind.value != "kernel":
            kind, name = params.kind.value, f"{_nbytes(params)} B"  # (a memset or copy the driver ran as a kernel)
        made.append(TimelineRecord(kind, name, begin - recording.origin, end - recording.origin, f"stream {stream}",
                                   launch, exe, node, number))
    return made


def _driver_kernel(name: str) -> bool:
    """Whether a kernel record's name is one of the driver's own kernels, with which it runs a memset or copy node
    in a conditional body ("memset32", measured on an H100, driver 580)."""
    return name.startswith(("memset", "memcpy"))


def _nbytes(params: object) -> int:
    """The bytes a memset or copy node's record writes."""
    if isinstance(params, MemsetParams):
        return params.element_size * params.count * params.height
    return int(getattr(params, "nbytes", 0))


def node_numbers(layout: GraphLayout, handles: Sequence[object], numbers: Sequence[int], next_number: int
                 ) -> tuple[dict[int, tuple[object, Any, int]], int]:
    """The nodes (handle, parameter record, number in its graph) of the graph an executable graph runs (``layout``)
    and of the graphs inside it, by their number in CUPTI's graphNodeId (see the module's docstring); and the first
    number of the nodes inside. ``handles``, ``numbers``, ``next_number``: the handles and numbers of the graph it was
    instantiated from, by position, and that graph's next number (an update leaves CUDA's numbers)."""
    found = {number: (handle, params, number) for number, handle, params in zip(numbers, handles, layout.params)}
    first = next_number
    _number_inside(layout, found, first)
    return found, first


def _number_inside(layout: GraphLayout, found: dict[int, tuple[object, Any, int]], number: int) -> int:
    """Number the nodes of the graphs inside ``layout``'s nodes from ``number`` on: each graph's own, then those of
    the graphs inside it; the next number."""
    for i in range(len(layout)):
        for inner in (layout.children[i],) if i in layout.children else layout.bodies.get(i, ()):
            for handle, params, own in zip(inner.handles, inner.params, inner.numbers):
                found[number] = (handle, params, own)
                number += 1
            number = _number_inside(inner, found, number)
    return number


def _fitting(numbering: tuple[dict[int, tuple[object, Any, int]], int],
             seen: list[tuple[str, str, int]]) -> dict[int, tuple[object, Any, int]]:
    """The nodes (handle, parameter record, number in its graph) by number that the records ``seen`` (kind, kernel
    name, number) fit: a node of the graph itself where each record of its number fits it, the nodes inside only
    where every record of a node inside fits the node numbered so (its kind and kernel, or a memset or copy the
    driver ran as its own kernel)."""
    found, first = numbering
    misfits: set[int] = set()
    for kind, name, number in seen:
        _, params, _ = found.get(number, (None, None, None))
        if params is None:
            fits = False
        elif kind == "kernel" and params.kind.value != "kernel":
            fits = _driver_kernel(name) and name.startswith(params.kind.value)
        else:
            fits = params.kind.value == kind and (kind != "kernel" or getattr(params.kernel, "name", None) == name)
        if not fits:
            misfits.add(number)
    inside_fits = all(number < first for number in misfits)
    return {number: found[number] for number in found if number not in misfits and (number < first or inside_fits)}


def made_while_recording(records: list[tuple], calls: set[int], origin: int) -> tuple[list[tuple], list[int | None]]:
    """Those of ``records`` that the launches made while recording ran (their correlation ids among ``calls``, the
    API calls': a graph's work by its launch's, ``_launches``), and the launch of each: a launch made before the
    recording began is left out whole, though its work ran while recording. A graph's work that no launch from the
    host is known for (correlation id 0, no launch of its graph) is kept where it began after ``origin``."""
    kept: list[tuple] = []
    launches: list[int | None] = []
    for record, launch in zip(records, _launches(records)):
        if (launch if record[7] else record[6]) in calls or (launch == 0 and record[2] >= origin):
            kept.append(record)
            launches.append(launch)
    return kept, launches


def _launches(records: list[tuple]) -> list[int | None]:
    """The launch of each record: None for a stream operation; for a graph node's work its correlation id (the
    cuGraphLaunch's) or, for the work of a conditional body (which CUPTI gives correlation id 0: the device launches
    it), the correlation id of the launch of the same executable graph that began last before it (one runs at a
    time)."""
    first: dict[tuple[int, int], int] = {}  # (graph id, correlation id) -> when its first work began
    for _, _, begin, _, _, _, correlation, graph_id, _ in records:
        if graph_id and correlation:
            first[graph_id, correlation] = min(begin, first.get((graph_id, correlation), begin))
    launches: list[int | None] = []
    for _, _, begin, _, _, _, correlation, graph_id, _ in records:
        if graph_id and not correlation:
            earlier = [(at, c) for (g, c), at in first.items() if g == graph_id and at <= begin]
            correlation = max(earlier)[1] if earlier else 0
        launches.append(correlation if graph_id else None)
    return launches


def _kernel_names(backend: CudaBackend) -> dict[str, str]:
    """The name each kernel gpugraph loaded has in CUPTI's records (its lowered name: mangled, for C++) -> its
    Kernel's name, which the CPU backend's records give."""
    return {_function_name(handle): kernel.name for handle, kernel in backend.loaded_functions()}


def _function_name(handle: int) -> str:
    name = call(drv.func_get_name, cu.CUfunction(handle))
    return name.decode() if isinstance(name, bytes) else str(name)
