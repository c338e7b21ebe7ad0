"""ExecState: the state of a GraphExec, and what it knows of the graph it runs.

An executable graph runs a copy of the graph it was made from, or last updated with (its source). It notes the
source's node handles at instantiate, since the backend addresses its nodes by them, and takes the rest (the
layout, a snapshot: ``_update.GraphLayout``) when a setter or an explanation first needs it, or just before the
source changes. The graph tells it then, and when a node is removed or a kernel node's attributes change; it
reads the graph only through ``gpugraph._graph_reads`` (``topology``, ``node_of``, ``embedded_graphs``, ...).
``gpugraph._exec`` adds the uncommon launches, updating, the setters and its lifetime.

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython, ``ExecState`` is a C class whose
fields ``_exec_state.pxd`` declares, and a launch in the common case (``ExecState.launch``) is made from C with no
Python call between the checks and the backend's driver call but a pending Params' patch; plain, a Python class with
the same fields as slots, and every launch takes the Python path.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from . import _graph_reads, _params
from ._attributes import KernelAttributes
from ._capture_rules import function_captures
from ._errors import GraphError
from ._graph_node import Node, handle_of
from ._graph_reads import GraphFields
from ._host_threads import HOST_THREADS
from ._kernel import Kernel, loaded_function
from ._nodes import KernelParams, NodeKind
from ._params import Param, ParamUses
from ._update import GraphLayout

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from . import _cython as cython

if cython.compiled:
    from cython.cimports.gpugraph._argpack import Layout, Slots, write_common
    from cython.cimports.libc.stdint import uint64_t
else:  # (compiled, _exec_state.pxd cimports them: C classes whose fields are read as C fields)
    from ._argpack import Layout, Slots
    from ._stream_state import StreamState
    from .backends._hot import HotCalls

MAX_SLOTS = 32  # the arguments of a node the compiled core packs on its stack (more: the checked path)
# KernelParams (a NamedTuple) made as tuple.__new__(KernelParams, fields), without its Python __new__: a fifth of the
# cost, on the paths that make one record per call.
_tuple_new = tuple.__new__

_EMBEDDING = (NodeKind.GRAPH, NodeKind.CONDITIONAL)


def _takes_params(graph: GraphFields[Any]) -> bool:
    """Whether a kernel node of ``graph``, or of a child graph or a conditional node's body within it, takes a
    Param."""
    topology = _graph_reads.topology(graph)
    for handle, record in zip(topology.handles, topology.records):
        if record.kind is NodeKind.KERNEL:
            if any(type(a) is Param for a in record.args):
                return True
        elif record.kind in _EMBEDDING and any(map(_takes_params, _graph_reads.embedded_graphs(graph, handle))):
            return True
    return False


def refuse_child_params(child: GraphFields[Any], graph: GraphFields[Any], handle: Any) -> None:
    """Refuse ``child``, the graph of the child-graph node ``handle`` of ``graph``, if it takes a Param (the
    Node is made only to name it)."""
    if _takes_params(child):
        node = _graph_reads.node_of(graph, handle)
        raise GraphError(f"a Param is used inside the child graph of {node!r}; Params are patched only in "
                         f"kernel nodes of the graph itself (add those nodes to it)")


# Every executable graph by the backend's handle of it, while it lives: a timeline's records name the backend's, and
# the Nodes are read through the GraphExec (gpugraph._timeline). Added to under _by_handle_lock, and read whole under
# it (executables): an instantiate on another thread would change it while it is read.
_by_handle: weakref.WeakValueDictionary[Any, ExecState] = weakref.WeakValueDictionary()
_by_handle_lock = threading.Lock()


def executables() -> list[tuple[Any, ExecState]]:
    """Every executable graph alive now, with the backend's handle of it (a snapshot)."""
    with _by_handle_lock:
        return list(_by_handle.items())


def executable_of(handle: object) -> ExecState | None:
    """The executable graph whose backend handle is ``handle``, while it lives, else None."""
    return _by_handle.get(handle)


def timeline_nodes(exe: ExecState) -> tuple[GraphLayout, list[Any], list[int], int] | None:
    """What a timeline names ``exe``'s nodes by: the graph it runs (its layout: as instantiated or last updated with,
    a snapshot taken before that graph changed); the handles and numbers of the nodes of the graph it was
    instantiated from, by position, and the number that graph's next node would have taken (CUDA's records number
    nodes so, also after an update). None once closed."""
    with exe._lock:
        if exe._handle is None:
            return None
        renamed, next_number = exe._numbering
        return (exe._read_layout(), list(exe._handles), [renamed.get(i, i) for i in range(len(exe._handles))],
                next_number)


@cython.cclass
class TurnLock:
    """The lock an executable graph's calls take turns under (reentrant, as ``threading.RLock``) where its launch's
    common case is compiled (``turn_lock``), which also keeps that launch out: ``gate`` counts 2 for each hold, and
    1 while such a launch is in the driver, the GIL released. The launch starts only at 0, with the GIL held since
    its checks (it takes the lock itself where it runs Python: a Param patch); a hold waits for one in the driver to
    return, so that no call of another thread reaches the driver with the executable graph meanwhile."""

    if not cython.compiled:  # (compiled, _exec_state.pxd declares the fields)
        __slots__ = ("_lock", "gate")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.gate = 0

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock (as ``RLock.acquire``: False where ``blocking`` is False and another thread holds it)."""
        if not self._lock.acquire(blocking):
            return False
        self.gate += 2
        try:
            while self.gate & 1:  # (a launch is in the driver: it returns in microseconds)
                time.sleep(0)
        except BaseException:  # (an interrupt while waiting: not taken)
            self.gate -= 2
            self._lock.release()
            raise
        return True

    def release(self) -> None:
        self._lock.release()  # (first: it refuses a thread that does not hold it, before the gate changes)
        self.gate -= 2

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def turn_lock() -> TurnLock | threading.RLock:
    """The lock a new executable graph's calls take turns under: a TurnLock where its launch's common case is
    compiled (and launched with no lock taken); plain, where every launch takes the lock, a ``threading.RLock``,
    whose ``with`` no interrupt can leave half done (a TurnLock's Python methods could be interrupted between the
    lock and the gate)."""
    return TurnLock() if cython.compiled else threading.RLock()


@cython.cclass
class KernelPatch:
    """The prepared patch of one kernel node of an executable graph whose arguments include Params (what ``launch``
    runs for a node whose Params changed): the node's own argument slots, into which a call writes the Params'
    current values (``params``: (position, slot code, the Param, whether it holds an Array)), then sets the node
    through the backend's hot node setter (``hot.exec_kernel_node_set``, with the addresses ``graph_exec``,
    ``context``, ``node`` and ``function`` and the launch shape). Where the set is refused (the context not this
    thread's current one, say), ``use()`` makes the context current and the set is made once more; a refusal then
    is raised by ``fail(call, code)``."""

    if not cython.compiled:  # (compiled, _exec_state.pxd declares the fields)
        __slots__ = ("_hot", "_slots", "_params", "_graph_exec", "_context", "_node", "_function", "_grid", "_block",
                     "_shared_mem", "_use", "_fail")

    def __init__(self, hot: HotCalls, graph_exec: int, context: int, node: int, function: int,
                 grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, slots: Slots,
                 params: list[tuple[int, int, Param, bool]], use: Callable[[], None],
                 fail: Callable[[str, int], None]) -> None:
        self._hot, self._slots, self._params = hot, slots, params
        self._graph_exec, self._context, self._node, self._function = graph_exec, context, node, function
        self._grid, self._block, self._shared_mem = grid, block, shared_mem
        self._use, self._fail = use, fail

    def __call__(self) -> None:
        slots = cython.declare(Slots, self._slots)
        for index, code, param, is_array in self._params:
            value = param.value
            if not slots.put(index, code, value.ptr if is_array else value):  # (each value was checked when set)
                raise TypeError(f"{param!r}: its value {value!r} does not fit its kernel's slot {index} ({chr(code)})")
        err = self._set()
        if err:  # (not in the device's context, say: this thread's first call there, or another library's switch)
            self._use()
            err = self._set()
        if err:
            self._fail("cuGraphExecKernelNodeSetParams", err)

    def _set(self) -> int:
        hot = cython.declare(HotCalls, self._hot)
        grid, block = self._grid, self._block
        return hot.exec_kernel_node_set(self._graph_exec, self._context, self._node, self._function, grid[0], grid[1],
                                        grid[2], block[0], block[1], block[2], self._shared_mem,
                                        cython.cast(Slots, self._slots).kernel_params())


@cython.cclass
class ExecState:
    """The fields of a GraphExec, and what it knows of its source: the layout, the nodes setters may name, the nodes
    removed (the graph tells it through the functions at the end here); the launch's common case. Never made alone (a
    GraphExec is one)."""

    if not cython.compiled:  # (compiled, _exec_state.pxd declares the fields)
        __slots__ = ("graph", "_graph_type", "device", "_backend", "_handle", "_launch", "_finalizer",
                     "_layout", "_handles", "_numbering", "_indices", "_params", "_changed", "_disabled", "_gone",
                     "_source", "_source_version", "_shape", "_recorded_events", "_lock", "_flags", "_arguments",
                     "_stale_for_kernels", "_hot", "_hot_address", "_hot_set", "_hot_context", "__weakref__")
        # (Those GraphExec.__init__ sets, which the methods here read.)
        graph: Any  # the Graph it was made from
        device: Any  # its Device
        _handle: Any  # the backend's executable graph; None once closed
        _recorded_events: list[Any] | None  # the events its event-record nodes record, once looked up
        _stale_for_kernels: bool  # (GraphExec's: see there)
        _params: ParamUses
        _changed: bool
        _lock: TurnLock | threading.RLock  # (its calls on several threads take turns under it: turn_lock)
        _hot: HotCalls | None  # the backend's hot calls (gpugraph.backends._hot), if it has them
        _hot_address: int  # the address they take for it, 0 where only the backend's exec_launch launches it
        _hot_set: int  # the address their node setter takes for it, 0 where only the backend's exec_set_node sets
        _hot_context: int  # the address of the context its nodes are set in

    def launch(self, stream: StreamState) -> None:
        """Enqueue one run of the whole graph on ``stream``, first patching nodes whose Params changed.

        See also: cudaGraphLaunch.
        """
        if cython.compiled:
            # The common case, launched from here: an open graph the backend's hot call can launch, on a Stream of
            # its device with a hot address, outside any capture and host function, its event-record nodes known
            # to be none and no upload for kernels due. Compiled only: the GIL is held from these checks until the
            # gate is closed (or the lock taken without waiting), so no other thread's call comes between them.
            lock = cython.declare(TurnLock, self._lock)
            hot = cython.declare(HotCalls, self._hot)
            if lock.gate == 0 and hot is not None and self._hot_address != 0 and isinstance(stream, StreamState):
                state = cython.declare(StreamState, stream)
                events = self._recorded_events
                # (StreamState's C fields, read as C: the capture link Stream.active_capture gives from Python.)
                if (state._hot_address != 0 and state._capture is None and state.device is self.device
                        and self._handle is not None and events is not None and len(events) == 0
                        and not self._stale_for_kernels and not HOST_THREADS and not function_captures):
                    uses = self._params
                    if not uses.pending:
                        lock.gate = 1  # (no Python runs until it is 0 again: no hold of this thread can wait on it)
                        try:
                            err = hot.graph_launch(self._hot_address, state._hot_address)
                        finally:
                            lock.gate -= 1  # (a hold that began meanwhile added its 2)
                        if err == 0:
                            return
                    elif lock._lock.acquire(False):  # (a patch runs Python: under the lock itself, as held)
                        lock.gate += 2
                        try:  # (patched as the Python path patches them: an error leaves them pending)
                            uses.patch(self._prepare_patch)
                            err = hot.graph_launch(self._hot_address, state._hot_address)
                        finally:
                            lock._lock.release()
                            lock.gate -= 2
                        if err == 0:
                            return
                    # (Else the lock is held, or the driver refused: the Python path launches, in the device's
                    # context where that was missing, and explains any other refusal.)
        self._launch_checked(stream)

    def _launch_checked(self, given: StreamState) -> None:
        """Every launch but the common case (GraphExec's)."""
        raise NotImplementedError

    def set_params(self, node: Node, *args: Any, grid: Any = None, block: Any = None,
                   shared_mem: int | None = None, kernel: Kernel | None = None) -> None:
        """Change a kernel node's arguments (all of them, or none to keep them) and launch shape.

        See also: cudaGraphExecKernelNodeSetParams.
        """
        if (cython.compiled and args and grid is None and block is None and shared_mem is None and kernel is None
                and self._set_arguments(node, args)):
            return
        self._set_params(node, args, grid, block, shared_mem, kernel)

    def _set_arguments(self, node: Node, args: tuple) -> bool:
        """set_params' common case, set from here (compiled): new arguments alone, which the node's slots take as
        they are (_argpack.write_common), for a kernel node of this executable graph taking no Params, whose kernel
        is loaded on its device with a Layout, set through the backend's hot node setter. False, nothing changed but
        ``_changed``, for anything else, or where the lock is held or the driver refuses: the checked path then
        sets it, or explains why not."""
        hot = cython.declare(HotCalls, self._hot)
        if hot is None or self._hot_set == 0 or HOST_THREADS or type(node) is not Node or len(args) > MAX_SLOTS:
            return False
        lock = cython.declare(TurnLock, self._lock)
        if not lock.acquire(False):  # (a C call, compiled)
            return False
        try:
            if self._handle is None:
                return False
            records = self._read_layout().params
            index = self._indices.get(handle_of(node))
            graph = node.graph
            if index is None or (graph is not self.graph and graph is not self._source):
                return False
            old = records[index]
            if type(old) is not KernelParams or (_params.in_use and index in self._params.positions()):
                return False
            kernel, grid, block, shared_mem, device_index = old[0], old[1], old[2], old[3], old[5]
            if type(kernel) is not Kernel or device_index != self.device.index:
                return False
            layout = getattr(loaded_function(kernel, self.device), "layout", None)  # (None: not loaded, untyped)
            if type(layout) is not Layout:
                return False
            slots = cython.declare(uint64_t[32])
            pointers = cython.declare(cython.p_void[32])
            typed: list[Any] = []
            count = cython.declare(cython.Py_ssize_t, write_common(
                cython.cast(Layout, layout).codes, cython.cast(Layout, layout).wants, self.device, args,
                cython.cast(cython.p_char, slots), typed))
            if count < 0:
                return False
            i = cython.declare(cython.Py_ssize_t)
            for i in range(count):
                pointers[i] = cython.address(slots[i])
            record = _tuple_new(KernelParams, (kernel, grid, block, shared_mem, tuple(typed), device_index))
            self._changed = True  # (first, as the checked path: an interrupted call may have changed it)
            if hot.exec_kernel_node_set(self._hot_set, self._hot_context, hot.node_address(self._handles[index]),
                                        cython.cast(Layout, layout).function, grid[0], grid[1], grid[2], block[0],
                                        block[1], block[2], shared_mem, cython.cast(cython.size_t, pointers)) != 0:
                return False
            records[index] = record
            return True
        finally:
            lock.release()

    def _set_params(self, node: Node, args: tuple, grid: Any, block: Any, shared_mem: int | None,
                            kernel: Kernel | None) -> None:
        """Every set_params but the common case (GraphExec's)."""
        raise NotImplementedError

    def _prepare_patch(self, index: int, record: KernelParams) -> Any:
        """The patch of the node at ``index`` taking Params (GraphExec's)."""
        raise NotImplementedError

    def _setup_source(self, graph: GraphFields[Any]) -> None:
        """Follow ``graph``, which the executable graph was just made from."""
        # Positions of nodes set_enabled may have turned off: they stay off through an update, as in CUDA.
        self._disabled: set[int] = set()
        # Positions of nodes removed from the graph it was made from (Graph.remove_node): the backend addresses its
        # nodes through that graph's, so setters refuse them.
        self._gone: set[int] = set()
        # The backend addresses nodes by the handles of the graph the exec was instantiated from, by
        # position in creation order: those are noted now. What setters and updates compare against (the
        # layout) is taken when first needed, or just before the graph changes (Graph._changing),
        # whichever comes first.
        topology = _graph_reads.topology(graph)
        self._handles = list(topology.handles)
        # Their numbers (those not their position) and the number the graph's next node would take: what CUDA's
        # profiling records number its nodes by, which an update leaves (a timeline's: timeline_nodes).
        self._numbering = (dict(topology.renamed), topology.numbered)
        self._source, self._source_version = graph, _graph_reads.version(graph)
        self._layout: GraphLayout | None = None
        self._recorded_events: list[Any] | None = None  # of its event-record nodes, once asked (_layout's)
        self._shape: Any = None  # the source's shape (_graph_reads.shape), once known
        self._indices: dict[Any, int] = {}  # node handle -> position, of the nodes setters may name
        with _by_handle_lock:
            _by_handle[self._handle] = self
        _graph_reads.followed_by(graph, self, updated=False)

    def _follow(self, graph: GraphFields[Any], shape: Any, found: dict[int, KernelParams]) -> None:
        """Address ``graph``, which the backend has just taken the parameters of (idempotent)."""
        self._source, self._source_version = graph, _graph_reads.version(graph)
        self._layout, self._shape = None, shape  # the rest is read from the new graph when needed
        self._recorded_events = None
        # (Its conditions drive this executable graph now, if it has conditional nodes.)
        _graph_reads.followed_by(graph, self, updated=True)
        self._changed = bool(self._disabled)  # the update replaced what setters set, not what set_enabled did
        self._params.adopt(found)

    def _read_layout(self) -> GraphLayout:
        if self._layout is None:
            self._layout = GraphLayout(self._source)
            self._indices = self._layout.index
            if self._source is not self.graph:  # the nodes of the graph it was made from still count
                self._indices = {**{h: i for i, h in enumerate(self._handles)}, **self._indices}
            if self._gone:
                self._indices = {h: i for h, i in self._indices.items() if i not in self._gone}
        return self._layout

    def _source_shape(self) -> Any:
        if self._shape is None:
            self._shape = self._layout.shape() if self._layout is not None else _graph_reads.shape(self._source)
        return self._shape

    def _events_recorded(self) -> list[Any]:
        """The events the graph's event-record nodes record. A launch outside any capture records them: a
        capture that recorded one of them before no longer owns its last record, so a wait on it is a plain
        wait, as the driver makes it (measured on the H200: no fork, a capturing stream waiting is refused,
        and a wait for an event last recorded in an ended capture is refused until it is recorded again)."""
        layout = self._layout
        if layout is None:  # the source is as it was made or updated from (a change would have read the layout)
            topology = _graph_reads.topology(self._source)
            if not topology.nested():  # (no child graph: the common case)
                return topology.recorded_events()
            layout = self._read_layout()
        events: list[Any] = []
        layouts = [layout]
        for layout in layouts:
            layouts.extend(layout.children.values())
            events.extend(params.event for params in layout.params if params.kind is NodeKind.EVENT_RECORD)
        return events

    @staticmethod
    def _find_params(graph: GraphFields[Any]) -> dict[int, KernelParams]:
        """The kernel nodes of ``graph`` taking Params, by position; Params inside child graphs are refused."""
        found = {}
        topology = _graph_reads.topology(graph)
        for i, (handle, record) in enumerate(zip(topology.handles, topology.records)):
            if record.kind is NodeKind.KERNEL:
                if any(type(a) is Param for a in record.args):
                    found[i] = record
            elif record.kind is NodeKind.GRAPH:
                refuse_child_params(_graph_reads.embedded_graphs(graph, handle)[0], graph, handle)
            elif record.kind is NodeKind.CONDITIONAL and any(map(_takes_params,
                                                                 _graph_reads.embedded_graphs(graph, handle))):
                node = _graph_reads.node_of(graph, handle)
                raise GraphError(f"a Param is used inside a body of {node!r}; Params are patched only in kernel nodes "
                                 f"of the graph itself")
        return found

    def _check_open(self, api: str) -> None:
        if self._handle is None:
            raise GraphError(f"{api}: this GraphExec is closed")


# What a graph tells the executable graphs made from it or updated with it (gpugraph._graph_state, _graph_edit,
# _graph), and what other modules ask of one (_captured): each reads the executable graph's own fields.


def before_change(exe: ExecState, graph: object) -> None:
    """``graph`` is about to change: ``exe`` reads its layout now if it still needs it."""
    if exe._source is graph and exe._layout is None and exe._handle is not None:
        exe._read_layout()


def patches(exe: ExecState, graph: object, handle: object) -> bool:
    """Whether ``exe`` patches Params through the node ``handle`` of ``graph``."""
    if exe._handle is None or graph is not exe.graph:
        return False
    handles = exe._handles
    return any(handles[i] == handle for i in exe._params.positions())


def node_removed(exe: ExecState, graph: object, handle: object) -> None:
    """The node ``handle`` of ``graph`` (``exe`` was made from it, or updated from it) is being removed: ``exe``'s
    setters refuse it from now on, and, for a node of the graph it was made from, any node at its place in a graph
    updated from too."""
    if exe._handle is None:
        return
    exe._read_layout()
    if graph is exe.graph:
        exe._gone.update(i for i, h in enumerate(exe._handles) if h == handle)
    exe._indices = {h: i for h, i in exe._indices.items() if h != handle and i not in exe._gone}


def attributes_changing(graph: GraphFields[Any], handle: object, attributes: KernelAttributes) -> None:
    """Kernel node ``handle`` of ``graph`` is about to take other attributes than ``attributes``: the executable
    graphs following the graph (or the graph embedding it at the top) keep these in their layout, which an update's
    refusal is explained with (an executable graph keeps the attributes it was made or last updated with)."""
    top, execs = _graph_reads.following_top(graph)
    for exe in execs:
        layout = exe._layout  # (read before the change began: Graph._tell_watchers)
        if layout is not None and exe._source is top:
            layout.keep_attributes(graph, handle, attributes)


def take_layout(exe: ExecState) -> None:
    """``exe`` takes its layout now (the graph it runs as it is now), not when first needed."""
    exe._read_layout()


def source_of(exe: ExecState) -> Any:
    """The graph ``exe`` runs: the one it was made from, or last updated with."""
    return exe._source
