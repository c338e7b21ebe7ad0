"""Graph: a template of operations (nodes) and their dependencies (edges).

gpugraph keeps each graph's nodes, edges, kinds and parameter records itself, as they are added, so
that queries, cycle checks, free ordering and update's comparison ask no driver. What a capture records
(other libraries' work too) is read from the backend once, when the capture has ended (``Graph._load``);
explicitly built and captured graphs look the same. The rules CUDA applies are checked here, at the call
that breaks them. The graph's nodes are ``_graph_node.Node``s.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from . import _capture, _capture_rules
from ._attributes import _KEEP, KernelAttributes, attributes_with, launch_refusal
from ._conditions import Condition, condition_args
from ._device import Device
from ._dot import DOT_FLAGS, to_dot
from ._errors import GraphError
from ._event import Event
from ._exec import GraphExec, check_stream
from ._graph_node import Node
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._instantiate import check_device_launch, instantiate_flags
from ._interrupts import without_interrupts
from ._kernel import Kernel, check_shared_mem, launch_dims
from ._memops import mem_ops_record
from ._memory import Array, normalize_dtype, normalize_shape
from ._nesting import nesting_refusal
from ._nodes import (
    BODY_KINDS,
    DEPENDENCY_KINDS,
    MEMORY_KINDS,
    SEMAPHORE_KINDS,
    ChildGraphParams,
    ConditionalParams,
    EmptyParams,
    KernelParams,
    NodeKind,
    Removed,
    why_gone,
)
from ._params import Param
from ._records import event_record, host_record, kernel_record, memcpy_record, memset_record
from ._scalars import as_bool, as_int, describe
from ._semaphores import semaphore_record
from ._topology import Topology
from ._update import attributes_changing
from ._user_objects import UserObject, count_of

# The most bodies a SWITCH node has (add_switch), on every backend. CUDA documents no maximum (the node's size is
# an unsigned int, "any value greater than zero"), so this bound is gpugraph's: thousands of branches are a table
# for a kernel to index, not bodies, and each body is a graph to make. tools/probes/gpu_probe_switch_limit.py
# measures what the driver accepts.
MAX_SWITCH_BODIES = 4096


class _ChainLock:
    """The locks of a graph and of the graphs embedding it, taken outermost first: the order in which a change of an
    embedded graph, which tells the graphs embedding it, and a reading of an owner, which reads what it embeds,
    both take them."""

    __slots__ = ("_locks",)

    def __init__(self, graph: Graph) -> None:
        locks = []
        owner: Graph | None = graph
        while owner is not None:
            locks.append(owner._lock)
            owner = owner._owner
        self._locks = locks[::-1]

    def __enter__(self) -> None:
        taken = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except BaseException:
            for lock in reversed(taken):
                lock.release()
            raise

    def __exit__(self, *exc_info: object) -> None:
        for lock in reversed(self._locks):
            lock.release()


class Graph:
    """A graph template: nodes and dependency edges, to be instantiated into a ``GraphExec``.

    Args:
        device: The Device the graph runs on (default: ``Device()``).

    See also: cudaGraphCreate.
    """

    __slots__ = ("device", "_backend", "_handle", "_fast", "_topology", "_nodes", "_children", "_owner",
                 "_owner_node", "_bodies", "_conditions",
                 "_recording", "_stale", "_lock", "_live_execs", "_execs", "_clone_of", "_cloned", "_version",
                 "_watchers", "_dead", "_user_objects", "__weakref__")

    def __init__(self, device: Any = None) -> None:
        device = Device() if device is None else device
        if not isinstance(device, Device):
            raise TypeError(f"Graph(device): expected a Device or None, got {type(device).__name__}")
        if HOST_THREADS:
            refuse_in_host_function("Graph()")
        backend = device._backend
        self._setup(device, backend.graph_create(device.index), owner=None)
        weakref.finalize(self, backend.graph_destroy, self._handle).atexit = False

    def _setup(self, device: Any, handle: Any, owner: Graph | None) -> None:
        self.device = device
        self._backend = device._backend
        self._handle = handle
        # The compiled lane of add_kernel, or None (it reads this object's fields: see cuda._fast.Builder). Not
        # for a child graph, whose changes the Python path tells its owner about.
        self._fast = self._backend.graph_builder(handle, device) if owner is None else None
        self._topology = Topology()  # the nodes, their records and edges: the graph's one record of them
        # The Node objects handed out, by backend handle: made when first asked for (a captured graph
        # nobody queries has none), kept so that a node is always the same object.
        self._nodes: dict[Any, Node] = {}
        self._owner = owner  # the graph whose node embeds this one: borrowed child graphs, conditional bodies
        self._owner_node: Any = None  # the handle of that node (None for a conditional node's body)
        self._bodies: dict[Any, tuple[Graph, ...]] = {}  # conditional node handle -> its bodies
        self._conditions: list[Condition] = []  # the Conditions this graph made, in order
        # Child-graph node handle -> the Graph over the graph it embeds, while one is in use: one at a time,
        # so that a node is one object and changes take turns under one lock (held weakly: a child Graph
        # holds its owner alive, not the other way round).
        self._children: weakref.WeakValueDictionary[Any, Graph] | None = None  # (made when first used)
        self._recording = 0  # how many captures record into the backend graph now (see _current)
        self._stale = False  # the backend graph may hold what the Topology has not noted: read it again
        # Changes (a backend call and the Topology's note of it) and readings take turns under it, so threads
        # sharing a graph see one order of nodes, the backend's.
        self._lock = threading.RLock()
        self._live_execs: weakref.WeakSet = weakref.WeakSet()
        # Every executable graph made from this graph, or updated from it: told when a node is removed.
        self._execs: weakref.WeakSet = weakref.WeakSet()
        # Why the graph can no longer be used, or None: it was embedded in a node that was removed (the backend
        # graph went with it).
        self._dead: str | None = None
        self._user_objects: dict[UserObject, int] = {}  # the references this graph holds (retain_user_object)
        self._clone_of: weakref.ref | None = None  # the graph this one was cloned from
        # The numbers of that graph's nodes when it was cloned -> their copies here (handles; Removed once removed).
        self._cloned: dict[Any, Any] = {}
        self._version = 0  # counts changes: what an executable graph made earlier no longer matches
        # Executable graphs to tell before the graph changes, by id; a collected one leaves by itself.
        self._watchers: dict[int, weakref.ref] = {}

    @property
    def _memory(self) -> bool:
        """Whether the graph has allocation or free nodes."""
        return self._topology.memory

    def _watch(self, exe: Any) -> None:
        """Call ``exe._before_change(self)`` before this graph next changes."""
        watchers, key = self._watchers, id(exe)
        watchers[key] = weakref.ref(exe, lambda _: watchers.pop(key, None))

    def _changing(self) -> None:
        """Called, under the graph's lock, before every change: the Topology is made whole (a change an
        interrupt cut short left the graph to be read again) and executable graphs made from the graph read
        what they need of it."""
        self._version += 1
        # (One test for the common case, when there is nothing to refuse, read or tell: the hot path of building.)
        if HOST_THREADS or self._stale or self._watchers or self._topology.unread is not None:
            self._prepare_change()

    def _prepare_change(self) -> None:
        if HOST_THREADS:
            refuse_in_host_function("changing a Graph (add_*, dependencies, removals)")
        if self._stale and not self._recording:
            self._load()
        self._tell_watchers()
        if self._topology.unread is not None:  # last: read before the backend graph changes
            self._topology.read_edges()

    def _tell_watchers(self) -> None:
        """The graph is about to change: executable graphs made from it read what they need of it first."""
        if self._watchers:
            watchers, self._watchers = self._watchers, {}
            for ref in list(watchers.values()):  # a collection may remove entries meanwhile
                exe = ref()
                if exe is not None:
                    exe._before_change(self)

    def _locked(self) -> Any:
        """The lock a change of the graph holds: its own, and those of the graphs embedding it (``_ChainLock``)."""
        return self._lock if self._owner is None else _ChainLock(self)

    def _begin_change(self, deps: list[Node] | None = None, what: str = "") -> list[int]:
        """Before a change of the backend graph (under the graph's lock): the graph counts as unread until
        ``_end_change``, so that an interrupt or an error in between leaves it to be read again (and the
        graph embedding this one, if any, forgets its Topology meanwhile). Returns the positions of the
        Nodes ``deps`` (from ``_deps``), found before anything changes (GraphError if one is gone)."""
        # Found first: a refused dependency is no change (no executable graph is told). Found again if
        # _changing read the graph anew (after an interrupted change), which may move positions.
        topology = self._topology
        positions = self._locate(deps, what) if deps else []
        self._changing()
        if deps and self._topology is not topology:
            positions = self._locate(deps, what)
        owner = self._owner
        while owner is not None:  # what the graphs embedding this one run changes too (read as it is, first)
            owner._version += 1
            owner._tell_watchers()
            owner = owner._owner
        self._stale = True
        if self._owner is not None:
            self._owner._keep_child(self._owner_node, None)
        return positions

    def _end_change(self) -> None:
        """The Topology has noted the change ``_begin_change`` announced."""
        self._stale = self._recording > 0
        if self._owner is not None:
            self._owner._keep_child(self._owner_node, self._topology)

    @classmethod
    def _wrap(cls, device: Any, handle: Any, owner: Graph | None = None, own: bool = True,
              recording: bool = False, topology: Topology | None = None, owner_node: Any = None) -> Graph:
        """A Graph over an existing backend graph, read now (its edges when first needed) unless given its
        Topology.

        Args:
            owner: The graph whose child-graph node embeds this one, for borrowed child graphs.
            own: Whether the wrapper destroys the backend graph when collected (see ``_take``).
            recording: The backend graph is a capture's, being recorded: it is read when first needed.
            topology: The backend graph's Topology, read already (a child graph's): taken, not read.
            owner_node: The handle of the child-graph node of ``owner`` that embeds the graph.
        """
        graph = object.__new__(cls)
        graph._setup(device, handle, owner)
        graph._owner_node = owner_node
        if recording:
            graph._begin_recording()
        elif topology is not None:
            graph._topology = topology
        else:
            graph._load()
        if own and owner is None:
            graph._take()
        return graph

    def _take(self) -> None:
        """Destroy the backend graph when this wrapper is collected (a capture hands it over at its end)."""
        weakref.finalize(self, self._backend.graph_destroy, self._handle).atexit = False

    def _level(self) -> int:
        """1 for a graph of its own; one more than its owner's for the graph embedded in a child-graph node."""
        level, owner = 1, self._owner
        while owner is not None:
            level, owner = level + 1, owner._owner
        return level

    def _load(self) -> None:
        """Read the backend graph (one listing of its nodes; parameter records only of nodes new to gpugraph;
        its edges when first needed). Nodes it no longer has (a discarded capture's) are dropped."""
        if self._dead is not None:
            raise GraphError(self._dead)
        with self._lock:
            self._topology = Topology.read(self._backend, self._handle, self._topology)
            if self._owner is not None:  # the graph embedding this one keeps its Topology: the new one now
                self._owner._keep_child(self._owner_node, self._topology)
            if self._nodes:  # nodes a re-read dropped are let go; the others may have moved
                position, kept = self._topology.position, {}
                for handle, node in self._nodes.items():
                    i = position.get(handle)
                    if i is not None:
                        node._i, kept[handle] = i, node
                self._nodes = kept
            if self._bodies:  # a dropped conditional node's bodies and condition go with it
                position = self._topology.position
                for handle in [h for h in self._bodies if h not in position]:
                    del self._bodies[handle]
                graph: Graph | None = self
                while graph is not None:
                    for condition in graph._conditions:
                        node = condition._node
                        if node is not None and node.graph is self and node._handle not in position:
                            condition._node = None  # (unused now: an instantiate names it)
                    graph = graph._owner
            self._stale = self._recording > 0  # last: an interrupted re-read is made again

    def _refresh(self) -> None:
        """Read the backend graph again after a capture ended that recorded into it, or was discarded.
        (Executable graphs made from it read it before, when the capture began: ``Capture.__enter__``.)"""
        with self._lock:
            self._version += 1
            self._load()

    def _begin_recording(self) -> None:
        """A capture records into the backend graph from now on: every query reads it again until it ends."""
        with self._lock:
            self._recording += 1
            self._stale = True

    def _end_recording(self) -> None:
        """A capture recording into the graph has ended (``_refresh`` reads the graph whole once more)."""
        with self._lock:
            self._recording -= 1

    def _current(self) -> Topology:
        """The graph's topology, read again first while a capture records into the graph (every query then
        reads the backend, as the graph changes under gpugraph) or after an interrupted change."""
        if self._stale:
            self._load()
        return self._topology

    def _position(self, handle: Any) -> int:
        """The creation-order position of the node ``handle``; GraphError if the graph has no such node."""
        i = self._topology.position.get(handle)
        if i is None and self._stale:  # a node a capture recorded since the graph was last read
            i = self._current().position.get(handle)
        if i is None:
            raise GraphError(f"{self!r} has no such node any more ({why_gone(handle)})")
        return i

    def _known(self, node: Node) -> int | None:
        """The position of ``node`` (a Node of this graph) in the Topology as it is, without reading the graph
        again (inside a change it must not be), or None if it is not there."""
        i, handles = node._i, self._topology.handles
        if i < len(handles) and handles[i] == node._handle:
            return i
        return self._topology.position.get(node._handle)  # (moved or gone: rare)

    def _index(self, node: Node) -> int:
        """The position of ``node`` (a Node of this graph); GraphError if the graph no longer has it."""
        i = self._known(node)
        return self._position(node._handle) if i is None else i  # (a node a recording capture made, or gone)

    def _has(self, node: Node) -> bool:
        """Whether ``node`` (a Node of this graph) is still in it."""
        return self._known(node) is not None or node._handle in self._current().position

    def _locate(self, nodes: list[Node], what: str) -> list[int]:
        """The positions of ``nodes`` (from ``_deps``); GraphError naming ``what`` if one is no longer in the
        graph. Before a change, under the graph's lock (positions move only when the graph is read anew)."""
        handles = self._topology.handles
        count = len(handles)
        positions = []
        for node in nodes:
            i = node._i
            # (A Node's position holds its very handle object unless the graph was read since: the common case.)
            if i >= count or handles[i] is not node._handle:
                return self._relocate(nodes, what)
            positions.append(i)
        return positions

    def _relocate(self, nodes: list[Node], what: str) -> list[int]:
        """``_locate`` when a node may have moved: all found in the graph as it is now (read once)."""
        topology = self._current()
        positions = []
        for node in nodes:
            i = self._known(node)
            if i is None:
                i = topology.position.get(node._handle)
                if i is None:
                    raise GraphError(f"{what}(after=...): {node!r} is no longer in this graph "
                                     f"({why_gone(node._handle)})")
            positions.append(i)
        return positions

    def _node(self, handle: Any) -> Node:
        """The Node of a backend node handle of this graph (one object per node). A node a capture has just
        recorded (a frontier's) is noted alone: its edges come with the next reading of the whole graph."""
        node = self._nodes.get(handle)
        if node is None:
            topology = self._topology
            i = topology.position.get(handle)
            if i is None:
                i = self._note_recorded(handle) if self._recording else self._position(handle)
                topology = self._topology
            record = topology.records[i]
            node = self._nodes[handle] = Node(self, handle, i, record, topology.number(i))
        return node

    def _note_recorded(self, handle: Any) -> int:
        """Note node ``handle``, which a capture recording into the graph made, without reading the whole graph
        (the graph stays to be read again)."""
        with self._lock:
            topology = self._topology
            i = topology.position.get(handle)
            if i is None:
                backend = self._backend
                record = backend.node_params(self._handle, handle)
                alloc = backend.node_allocation(self._handle, handle) if record.kind in MEMORY_KINDS else None
                i = len(topology.handles)
                topology.add(handle, record, (), alloc)
            return i

    def _child(self, handle: Any) -> Graph:
        """The Graph over what the child-graph node ``handle`` embeds: the one in use, if any, else a new one
        over the Topology this graph's keeps of it (the backend graph is read once)."""
        if self._children is None:
            with self._lock:  # (one map: two threads must not each make one)
                if self._children is None:
                    self._children = weakref.WeakValueDictionary()
        graph = self._children.get(handle)
        if graph is None:
            i = self._position(handle)
            topology = self._topology
            graph = Graph._wrap(self.device, topology.records[i].graph, owner=self, owner_node=handle,
                                topology=topology.children.get(i))
            topology.children[i] = graph._topology
            self._children[handle] = graph
        return graph

    def _keep_child(self, handle: Any, topology: Topology | None) -> None:
        """Keep ``topology`` as that of the graph the child-graph node ``handle`` embeds (read again, or
        changed); None: forget it, to be read again (a change is under way). A node no longer here (a
        discarded capture's) is let be."""
        node = self._nodes.get(handle)
        i = self._known(node) if node is not None else self._topology.position.get(handle)
        if i is None:
            return
        if topology is None:
            self._topology.children.pop(i, None)
        else:
            self._topology.children[i] = topology

    def _neighbours(self, node: Node, dependents: bool) -> tuple[Node, ...]:
        topology = self._current()  # (first: a capture recording into the graph may have moved the node)
        i = self._index(node)
        handles = topology.handles
        return tuple(self._node(handles[j]) for j in (topology.dependents(i) if dependents else topology.deps_of(i)))

    @staticmethod
    def _as_nodes(after: Any, what: str) -> tuple[Any, ...]:
        """The nodes an ``after=`` argument of the call ``what`` names: None, a Node, or an iterable of them."""
        if after is None:
            return ()
        if isinstance(after, Node):
            return (after,)
        try:
            return tuple(after)
        except TypeError:
            raise TypeError(f"{what}(after=...): expected a Node or an iterable of Nodes, got "
                            f"{describe(after)}") from None

    def _deps(self, after: Any, what: str) -> list[Node]:
        """The Nodes ``after`` names, checked to be Nodes of this graph, each named once (that they are still
        in the graph, ``_begin_change`` checks under the lock)."""
        if type(after) is Node and after.graph is self:  # (one node of this graph: the hot path of building)
            return [after]
        nodes: list[Node] = []
        handles: list[Any] = []
        for node in self._as_nodes(after, what):
            if not isinstance(node, Node):
                raise TypeError(f"{what}(after=...): expected Nodes, got {type(node).__name__}")
            if node.graph is not self:
                raise GraphError(f"{what}(after=...): {node!r} belongs to another graph")
            if node._handle in handles:
                raise GraphError(f"{what}(after=...): {node!r} is listed twice")
            if not self._has(node):  # (each node's errors in turn; checked again under the lock: _locate)
                raise GraphError(f"{what}(after=...): {node!r} is no longer in this graph ({why_gone(node._handle)})")
            nodes.append(node)
            handles.append(node._handle)
        return nodes

    def _adopt(self, handle: Any, record: Any, positions: list[int], alloc: Any = None) -> Node:
        """Note a node the backend has just added after the nodes at ``positions`` (from ``_begin_change``)."""
        topology = self._topology
        i = len(topology.handles)
        number = topology.add(handle, record, positions, alloc)
        # (Position and number are one int object when equal, as they mostly are: 28 bytes per node.)
        node = self._nodes[handle] = Node(self, handle, number if number == i else i, record, number)
        return node

    def _add(self, params: Any, after: Any, what: str) -> Node:
        """Add the node ``params`` describes after the nodes ``after`` names (``what``: the call, for errors).

        The compiled lane of add_kernel (cuda._fast.Builder) makes the same change in its common case, with the
        conditions of ``_changing``, ``_begin_change``, ``_locate`` and ``_end_change``: keep them in step."""
        deps = self._deps(after, what)
        with self._locked():
            positions = self._begin_change(deps, what)
            backend = self._backend
            handle = backend.graph_add_node(self._handle, params, [node._handle for node in deps])
            if params.kind is NodeKind.GRAPH or params.kind is NodeKind.CONDITIONAL:
                # (the node embeds a copy, or has bodies of its own: its record names those)
                params = backend.node_params(self._handle, handle)
            node = self._adopt(handle, params, positions)
            self._end_change()
            return node

    # Adding nodes

    def add_kernel(self, kernel: Kernel, grid: Any, block: Any, *args: Any, shared_mem: int = 0,
                   after: Any = (), device: Device | None = None) -> Node:
        """Add a kernel launch node. See ``Stream.launch`` for the arguments.

        ``device``: the device the kernel runs on, any of the graph's backend (None: the graph's); Arrays of
        other devices than that one need peer access, as for a launch.

        See also: cudaGraphAddKernelNode.
        """
        fast = self._fast  # (a typical node, which the compiled lane may add whole)
        if (fast is not None and device is None and type(kernel) is Kernel and type(shared_mem) is int
                and not shared_mem):
            node = fast.add_kernel(self, kernel, grid, block, args, after)
            if node is not None:
                return node
        if type(kernel) is not Kernel:
            raise TypeError(f"add_kernel(kernel): expected a Kernel, got {type(kernel).__name__}")
        if device is None:
            device = self.device
        elif not isinstance(device, Device):
            raise TypeError(f"add_kernel(device): expected a Device or None, got {type(device).__name__}")
        elif device.backend != self.device.backend:
            raise ValueError(f"add_kernel(device): {device} is a device of another backend than the graph's "
                             f"({self.device})")
        if device is not self.device and self._in_body():
            raise GraphError(f"add_kernel(device={device}): {self!r} is the body of a conditional node, whose nodes "
                             f"all run on its graph's device ({self.device})")
        grid, block = launch_dims(grid, block)
        converted = kernel.convert_args(args, device, typed=True, bind=False)
        converted = self._condition_values(converted, f"add_kernel({kernel!r})")
        params = KernelParams(kernel, grid, block, check_shared_mem(shared_mem), converted, device.index)
        self._refuse_body_params(params, "add_kernel")
        device._load_kernel(kernel)
        device._check_shared(kernel, params.shared_mem)
        node = self._add(params, after, "add_kernel")
        kernel.bind_params(converted)  # (once the node is made: a refused add_kernel changes no Param)
        return node

    def add_memcpy(self, dst: Any, src: Any, nbytes: int | None = None, after: Any = (), *, shape: Any = None,
                   dst_origin: Any = None, src_origin: Any = None) -> Node:
        """Add a copy node (any direction; Arrays or C-contiguous NumPy arrays). An ordinary NumPy array's pages are
        page-locked while a graph or executable graph refers to the node, so that the copy reads or writes the array at
        its turn (memory page-locked already, such as ``Device.pinned``'s, is used as it is).

        A 2-D or 3-D copy: ``shape`` (elements: ``w``, ``(h, w)`` or ``(d, h, w)``) of the arrays seen as (slices,
        rows, row), each of 1 to 3 dimensions and one dtype, from ``src_origin`` to ``dst_origin`` (default: 0s). An
        array whose rows are padded (pitched memory) is one whose last axis is the pitch.

        Raises:
            TypeError: If the dtypes differ and ``nbytes`` is not given.
            ValueError: If the copy moves 0 bytes, a box passes the end of an array, or the driver refuses to page-lock
                a NumPy operand (or it writes memory registered read-only).

        See also: cudaGraphAddMemcpyNode1D, cudaGraphAddMemcpyNode (a 3-D copy).
        """
        return self._add(memcpy_record(self.device, dst, src, nbytes, "add_memcpy", shape=shape,
                                       dst_origin=dst_origin, src_origin=src_origin), after, "add_memcpy")

    def add_memset(self, dst: Array, value: Any, count: int | None = None, after: Any = (), *, shape: Any = None,
                   origin: Any = None) -> Node:
        """Add a node setting ``count`` elements (default: all) of ``dst`` to ``value``; or a 2-D memset of the box
        ``shape`` (``(h, w)`` elements) at ``origin`` of ``dst``, a 1- or 2-D Array (its last axis a row).

        See also: cudaGraphAddMemsetNode.
        """
        return self._add(memset_record(self.device, dst, value, count, "add_memset", shape=shape, origin=origin),
                         after, "add_memset")

    def add_host(self, fn: Callable[..., Any], *args: Any, after: Any = ()) -> Node:
        """Add a node calling ``fn(*args)`` on the host; the graph keeps ``fn`` and ``args`` alive.

        See also: cudaGraphAddHostNode.
        """
        self._refuse_in_body("add_host", "host")
        return self._add(host_record(fn, args, "add_host"), after, "add_host")

    def add_empty(self, after: Any = ()) -> Node:
        """Add a node that does nothing: a join point. See also: cudaGraphAddEmptyNode."""
        return self._add(EmptyParams(), after, "add_empty")

    def add_child(self, graph: Graph, after: Any = ()) -> Node:
        """Add a node running a copy of ``graph`` (taken now).

        Raises:
            GraphError: If ``graph`` is this graph, on another device, holds allocation or free nodes, or
                would make graphs nest more than ``MAX_NESTING`` (64) levels deep.

        See also: cudaGraphAddChildGraphNode.
        """
        self._check_child(graph, "add_child")
        with self._lock:  # (the errors of after= first)
            self._locate(self._deps(after, "add_child"), "add_child")
        refusal = nesting_refusal(self, graph)
        if refusal is not None:
            raise GraphError(f"add_child: {refusal}")
        node = self._add(ChildGraphParams(graph._handle), after, "add_child")
        # The copy the node embeds is described now, from the graph copied: it is never read node by node.
        with self._lock:
            i = self._index(node)
            self._topology.children[i] = Topology.copy_of(graph._current(), self._backend,
                                                          self._topology.records[i].graph)
        return node

    def _check_child(self, graph: Any, what: str) -> None:
        """Refuse ``graph`` as the graph a child-graph node of this graph embeds a copy of (but for the nesting
        limit: ``nesting_refusal``)."""
        if not isinstance(graph, Graph):
            raise TypeError(f"{what}(graph): expected a Graph, got {type(graph).__name__}")
        if graph.device is not self.device:
            raise GraphError(f"{what}: the child graph is on {graph.device}, this graph on {self.device}")
        if graph is self:
            raise GraphError(f"{what}: a graph cannot contain itself")
        if graph._memory:
            raise GraphError(f"{what}: a graph with allocation or free nodes cannot be used as a child graph")
        if graph._holds(NodeKind.CONDITIONAL):
            raise GraphError(f"{what}: {graph!r} holds conditional nodes; a graph with conditional nodes cannot "
                             f"be used as a child graph (CUDA refuses it)")
        if self._in_body():
            refused = graph._holds_other_than(BODY_KINDS)
            if refused is not None:
                raise GraphError(f"{what}: {self!r} is the body of a conditional node, which cannot hold "
                                 f"{refused.value} nodes, and {graph!r} holds one (CUDA refuses them there)")

    # Conditional nodes

    def condition(self, default: int = 0, reset: bool = True) -> Condition:
        """A new Condition for a conditional node of this graph or of one of its bodies; kernels of the graph set
        its value on the device (``cudaGraphSetConditional``).

        Args:
            default: The value each launch starts with when ``reset`` (an unsigned 32-bit int).
            reset: Start each launch with ``default``; when False, a kernel must set the value before the
                conditional node reads it (CUDA leaves it undefined at a launch's start).

        See also: cudaGraphConditionalHandleCreate (cudaGraphCondAssignDefault for ``reset``).
        """
        if not isinstance(default, (int, np.integer)) or isinstance(default, bool):
            raise TypeError(f"condition(default): expected an int, got {default!r} ({type(default).__name__})")
        if not 0 <= default < 2**32:
            raise ValueError(f"condition(default): a condition's value is an unsigned 32-bit int; got {default}")
        if as_bool(reset) is None:
            raise TypeError(f"condition(reset): expected a bool, got {describe(reset)}")
        reset = bool(reset)
        if HOST_THREADS:
            refuse_in_host_function("Graph.condition")
        with self._lock:
            handle, value = self._backend.graph_condition(self._handle, int(default), reset)
            condition = Condition(self, int(default), reset, handle, value)
            self._conditions.append(condition)
        return condition

    def add_if(self, condition: Condition, has_else: bool = False, after: Any = ()) -> Node:
        """Add a node that runs its first body when ``condition``'s value is not 0 and, with ``has_else``, its
        second when it is 0. Fill the bodies through ``node.bodies``.

        See also: cudaGraphAddNode with cudaGraphCondTypeIf (size 2 for an else: CUDA 12.8).
        """
        if as_bool(has_else) is None:
            raise TypeError(f"add_if(has_else): expected a bool, got {describe(has_else)}")
        return self._add_conditional("if", condition, 2 if has_else else 1, after)

    def add_while(self, condition: Condition, after: Any = ()) -> Node:
        """Add a node that runs its body again and again while ``condition``'s value is not 0, checked before
        each run: a kernel of the body (or before the node) sets it to 0 to stop. Fill the body through
        ``node.bodies[0]``.

        See also: cudaGraphAddNode with cudaGraphCondTypeWhile.
        """
        return self._add_conditional("while", condition, 1, after)

    def add_switch(self, condition: Condition, count: int, after: Any = ()) -> Node:
        """Add a node with ``count`` bodies (1 to ``gg.MAX_SWITCH_BODIES``) that runs body ``n`` when ``condition``'s
        value is ``n`` (none when it is ``count`` or more). Fill the bodies through ``node.bodies``.

        Raises:
            TypeError: If ``count`` is not an int (a NumPy integer too; not a bool).
            ValueError: If ``count`` is below 1 or above ``gg.MAX_SWITCH_BODIES``.

        See also: cudaGraphAddNode with cudaGraphCondTypeSwitch (CUDA 12.8).
        """
        number = as_int(count)
        if number is None:
            raise TypeError(f"add_switch(count): expected a positive int (the number of bodies), got {describe(count)}")
        if not 1 <= number <= MAX_SWITCH_BODIES:
            more = "; for more cases, let one body's kernel choose by the value" if number > 1 else ""
            raise ValueError(f"add_switch(count): expected a positive int of at most {MAX_SWITCH_BODIES} "
                             f"(gg.MAX_SWITCH_BODIES, the bodies a SWITCH node may have), got {count!r}{more}")
        return self._add_conditional("switch", condition, number, after)

    def _add_conditional(self, kind: str, condition: Any, count: int, after: Any) -> Node:
        what = f"add_{kind}"
        if type(condition) is not Condition:
            raise TypeError(f"{what}(condition): expected a Condition (Graph.condition), "
                            f"got {type(condition).__name__}")
        self._check_condition(condition, what)
        if condition._node is not None:
            raise GraphError(f"{what}: {condition!r} is read by {condition._node!r} already; a condition belongs to "
                             f"one conditional node (make another with Graph.condition)")
        node = self._add(ConditionalParams(kind, condition, (None,) * count), after, what)
        condition._node = node
        self._body_graphs(node)
        return node

    def _body_graphs(self, node: Node) -> tuple[Graph, ...]:
        """The Graphs over the bodies of the conditional node ``node`` (made when first asked for)."""
        bodies = self._bodies.get(node._handle)
        if bodies is None:
            with self._lock:
                bodies = self._bodies.get(node._handle)
                if bodies is None:
                    record = self._current().records[self._index(node)]
                    bodies = tuple(Graph._wrap(self.device, handle, owner=self, topology=Topology())
                                   for handle in record.bodies)
                    self._bodies[node._handle] = bodies
        return bodies

    def _condition_values(self, args: tuple, what: str) -> tuple:
        """A kernel node's ``args`` with each Condition among them (checked: this graph's, or one of a graph it is
        a body of) replaced by the value its kernel is passed (the backend's handle); ``args`` when none is."""
        conditions = condition_args(args)
        if not conditions:
            return args
        for condition in conditions:
            self._check_condition(condition, what)
        return tuple(np.uint64(a._value) if type(a) is Condition else a for a in args)

    def _refuse_body_params(self, record: KernelParams, what: str) -> None:
        if self._in_body() and any(type(a) is Param for a in record.args):
            raise GraphError(f"{what}({record.kernel!r}): {self!r} is the body of a conditional node, and a Param is "
                             f"patched by an executable graph's setters, which take no node of a body (CUDA's); "
                             f"pass the value, or change the body with exe.update")

    def _check_condition(self, condition: Condition, what: str) -> None:
        """Refuse ``condition`` unless it was made by this graph or by a graph this one is a body of."""
        graph: Graph | None = self
        while graph is not None:
            if graph is condition.graph:
                return
            graph = graph._owner
        raise GraphError(f"{what}: {condition!r} was made by {condition.graph!r}; only its nodes and those of its "
                         f"bodies may use it, and {self!r} is none of them")

    def _in_body(self) -> bool:
        """Whether this graph is a conditional node's body."""
        return self._owner is not None and self._owner_node is None

    def _refuse_in_body(self, what: str, kind: str) -> None:
        if self._in_body():
            raise GraphError(f"{what}: {self!r} is the body of a conditional node, which cannot hold {kind} nodes "
                             f"(CUDA refuses them there)")

    def _holds(self, kind: NodeKind) -> bool:
        """Whether the graph has a node of ``kind`` (its child graphs' and bodies' nodes are not looked at)."""
        return any(record.kind is kind for record in self._current().records)

    def _holds_other_than(self, kinds: frozenset) -> NodeKind | None:
        """The kind of a node of the graph, or of its child graphs, that is not among ``kinds``, or None."""
        topology = self._current()
        for i, record in enumerate(topology.records):
            if record.kind not in kinds:
                return record.kind
            if record.kind is NodeKind.GRAPH:
                inner = self._child(topology.handles[i])._holds_other_than(kinds)
                if inner is not None:
                    return inner
        return None

    def _check_conditional_instantiate(self) -> None:
        """The rules CUDA applies at the instantiation of a graph with conditional nodes."""
        if len(self._live_execs):
            raise GraphError("instantiate: a graph with conditional nodes may have only one executable graph at a "
                             "time (CUDA refuses another); close the other one first")
        pending = [self]
        for graph in pending:
            for condition in graph._conditions:
                if condition._node is None:
                    raise GraphError(f"instantiate: {condition!r}, made by {graph!r}, is read by no conditional "
                                     f"node (CUDA refuses a graph with an unused condition)")
            for bodies in graph._bodies.values():
                pending.extend(bodies)

    def add_event_record(self, event: Event, after: Any = ()) -> Node:
        """Add a node recording ``event``. See also: cudaGraphAddEventRecordNode."""
        record = event_record(self.device, NodeKind.EVENT_RECORD, event, "add_event_record")
        self._refuse_in_body("add_event_record", "event record")
        return self._add(record, after, "add_event_record")

    def add_event_wait(self, event: Event, after: Any = ()) -> Node:
        """Add a node waiting for ``event``'s last record. See also: cudaGraphAddEventWaitNode."""
        record = event_record(self.device, NodeKind.EVENT_WAIT, event, "add_event_wait")
        self._refuse_in_body("add_event_wait", "event wait")
        return self._add(record, after, "add_event_wait")

    def add_semaphore_signal(self, semaphores: Any, values: Any = None, after: Any = ()) -> Node:
        """Add a node signaling ``semaphores`` (an ExternalSemaphore of this graph's device, or a list): timeline
        ones to ``values`` (one int for all, or one per semaphore), binary ones (no value).

        See also: hipGraphAddExternalSemaphoresSignalNode, cudaGraphAddExternalSemaphoresSignalNode.
        """
        return self._add_semaphores(NodeKind.SEMAPHORE_SIGNAL, semaphores, values, after, "add_semaphore_signal")

    def add_semaphore_wait(self, semaphores: Any, values: Any = None, after: Any = ()) -> Node:
        """Add a node that waits until ``semaphores`` are signaled (timeline ones to at least ``values``, binary ones
        once each) before the nodes after it run.

        See also: hipGraphAddExternalSemaphoresWaitNode, cudaGraphAddExternalSemaphoresWaitNode.
        """
        return self._add_semaphores(NodeKind.SEMAPHORE_WAIT, semaphores, values, after, "add_semaphore_wait")

    def _add_semaphores(self, kind: NodeKind, semaphores: Any, values: Any, after: Any, what: str) -> Node:
        record = semaphore_record(self.device, kind, semaphores, values, what)
        self._refuse_in_body(what, kind.value.replace("_", " "))
        return self._add(record, after, what)

    def add_mem_ops(self, ops: Any, after: Any = ()) -> Node:
        """Add a node running memory operations in order: ``gg.WaitValue`` (wait for a value in device memory) and
        ``gg.WriteValue`` (write one), one or a list, on Arrays of 4- or 8-byte integers of this graph's device.

        See also: hipGraphAddBatchMemOpNode, cuGraphAddBatchMemOpNode.
        """
        record = mem_ops_record(self.device, ops, "add_mem_ops")
        self._refuse_in_body("add_mem_ops", "batch memory-op")
        return self._add(record, after, "add_mem_ops")

    def add_alloc(self, shape: Any, dtype: Any, after: Any = (), access: Any = (),
                  device: Device | None = None) -> Node:
        """Add a graph-memory allocation node; ``node.array`` is usable by nodes ordered after it.

        ``device``: the device whose memory it is, any of the graph's backend (None: the graph's), as a kernel
        node's ``device``. ``access``: other devices (a Device or several) whose kernels and kernel nodes may
        use it too, for reading and writing (the only access CUDA gives graph memory); a kernel node of the
        graph's device using memory of another device needs that device here.

        Raises:
            TypeError: If ``access`` holds something other than Devices, or ``device`` is not a Device.
            ValueError: If ``access`` names the allocation's device, a device of another backend, or one that
                the hardware does not let reach the allocation's device; or ``device`` is of another backend.

        See also: cudaGraphAddMemAllocNode (poolProps.location, accessDescs), hipMemPoolSetAccess.
        """
        shape, dtype = normalize_shape(shape), normalize_dtype(dtype)
        if device is None:
            device = self.device
        elif not isinstance(device, Device):
            raise TypeError(f"add_alloc(device): expected a Device or None, got {type(device).__name__}")
        elif device.backend != self.device.backend:
            raise ValueError(f"add_alloc(device): {device} is a device of another backend than the graph's "
                             f"({self.device})")
        sharers = device._sharers(access, "add_alloc")
        self._check_memory_allowed("add_alloc")
        deps = self._deps(after, "add_alloc")
        with self._locked():
            positions = self._begin_change(deps, "add_alloc")
            backend = self._backend
            handle, ptr, alloc = backend.graph_add_alloc(self._handle, Array.bytes_for(shape, dtype),
                                                         [node._handle for node in deps], device.index, sharers)
            node = self._adopt(handle, backend.node_params(self._handle, handle), positions, alloc)
            node._array = Array(device, ptr, shape, dtype, alloc)
            self._end_change()
            return node

    def add_free(self, allocation: Node | Array, after: Any = ()) -> Node:
        """Add a node freeing a graph allocation (an allocation node of this graph, or its Array).

        Raises:
            GraphError: If ``allocation`` is not an allocation, is freed twice in this graph, or the free
                is not ordered after its allocation node.

        See also: cudaGraphAddMemFreeNode.
        """
        self._check_memory_allowed("add_free")
        alloc = self._freed_allocation(allocation)
        deps = self._deps(after, "add_free")
        with self._lock:
            self._locate(deps, "add_free")
        alloc_node = None
        # Allocations are told apart by the backend's record, not by address: CUDA gives an allocation
        # made after a free the freed allocation's address.
        topology = self._current()
        for i, allocated in topology.allocs.items():
            if allocated is alloc:
                node = self._node(topology.handles[i])
                if node.kind is NodeKind.MEM_FREE:
                    raise GraphError(f"add_free: {alloc.owner} is already freed by {node!r} (double free)")
                alloc_node = node
        if alloc_node is not None and not self._reaches(alloc_node, deps):
            raise GraphError(f"add_free: the free must be ordered after {alloc_node!r}; "
                             f"pass after= that node or one that follows it")
        with self._locked():
            positions = self._begin_change(deps, "add_free")
            backend = self._backend
            handle = backend.graph_add_free(self._handle, alloc, [node._handle for node in deps])
            node = self._adopt(handle, backend.node_params(self._handle, handle), positions, alloc)
            self._end_change()
            return node

    def _freed_allocation(self, allocation: Any) -> Any:
        """The allocation record ``add_free(allocation)`` frees: of an allocation node of this graph, or of a
        graph allocation's Array."""
        if isinstance(allocation, Node):
            if allocation.graph is not self:
                raise GraphError(f"add_free: {allocation!r} belongs to another graph; pass its Array instead")
            if allocation.kind is not NodeKind.MEM_ALLOC:
                raise GraphError(f"add_free({allocation!r}): the node is a {allocation.kind.value} node, "
                                 f"not an allocation (got {allocation.kind})")
            return allocation.array._alloc
        if type(allocation) is Array:
            if allocation._alloc.origin != "graph":
                raise GraphError(f"add_free: {allocation.ptr:#x} is not the address of a graph allocation "
                                 f"(got {allocation._alloc.owner})")
            return allocation._alloc
        raise TypeError(f"add_free: expected an allocation Node or an Array, got {type(allocation).__name__}")

    def _check_memory_allowed(self, what: str) -> None:
        self._refuse_in_body(what, "allocation or free")
        if self._owner is not None:
            raise GraphError(f"{what}: this graph is embedded in a child-graph node; "
                             f"child graphs cannot hold allocation or free nodes")
        if len(self._live_execs):
            raise GraphError(f"{what}: a graph with memory nodes may have only one executable graph; "
                             f"close the one instantiated from this graph first")

    # Edges

    def _reaches(self, source: Node, targets: Iterable[Node]) -> bool:
        """Whether any of ``targets`` (Nodes of this graph) is ``source`` or depends on it, directly or not."""
        topology = self._current()
        return topology.reaches(self._index(source), [self._index(node) for node in targets])

    def _edge_nodes(self, a: Node, b: Node, what: str) -> None:
        for name, node in (("from", a), ("to", b)):
            if not isinstance(node, Node):
                raise TypeError(f"{what}: expected Nodes, got {type(node).__name__} for '{name}'")
            self._check_in_graph(node, what)

    def _check_in_graph(self, node: Node, what: str) -> None:
        """Refuse ``node`` (a Node) unless it is one of this graph's and still in it."""
        if node.graph is not self:
            raise GraphError(f"{what}: {node!r} belongs to another graph")
        if not self._has(node):
            raise GraphError(f"{what}: {node!r} is no longer in this graph ({why_gone(node._handle)})")

    def _change_edge(self, a: Node, b: Node, add: bool, kind: str = "full") -> None:
        """Add (of ``kind``) or remove the edge from ``a`` to ``b`` in the backend graph and the Topology
        (checked)."""
        with self._locked():
            self._begin_change()
            source, target = self._index(a), self._index(b)
            if add:
                self._backend.graph_add_dependency(self._handle, a._handle, b._handle, kind)
                self._topology.add_edge(source, target)
            else:
                self._backend.graph_remove_dependency(self._handle, a._handle, b._handle)
                self._topology.remove_edge(source, target)
            self._end_change()

    def add_dependency(self, a: Node, b: Node, kind: str = "full") -> None:
        """Make ``b`` wait for ``a``. ``kind`` (one of ``gpugraph.DEPENDENCY_KINDS``) says for what: "full", until
        ``a`` has finished; between two kernel nodes also "programmatic" (programmatic dependent launch: ``b`` may
        start once every block of ``a`` has called ``cudaTriggerProgrammaticLaunchCompletion()`` or exited, and
        its ``cudaGridDependencySynchronize()`` waits for ``a`` to finish and its writes to show) or
        "launch_order" (``b`` may start once every block of ``a`` has started). The CPU backend runs every edge
        as a full one, which each kind allows.

        Raises:
            ValueError: If ``kind`` is not one of DEPENDENCY_KINDS.
            GraphError: If the edge exists already (of any kind), would close a cycle, or is programmatic or
                launch-order between nodes that are not both kernel nodes.

        See also: cudaGraphAddDependencies (its edge data: CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, ...).
        """
        if kind not in DEPENDENCY_KINDS:
            raise ValueError(f"add_dependency(kind): expected one of {', '.join(DEPENDENCY_KINDS)}, got {kind!r}")
        self._edge_nodes(a, b, "add_dependency")
        if kind != "full" and (a.kind is not NodeKind.KERNEL or b.kind is not NodeKind.KERNEL):
            raise GraphError(f"add_dependency({a!r}, {b!r}, kind={kind!r}): a {kind} edge joins two kernel nodes; "
                             f"got a {a.kind.value} node to a {b.kind.value} node")
        if a is b or self._reaches(b, [a]):
            raise GraphError(f"add_dependency({a!r}, {b!r}): {b!r} already comes before {a!r}; "
                             f"the edge would make a cycle")
        source, target = self._index(a), self._index(b)
        if source in self._topology.deps_of(target):
            raise GraphError(f"add_dependency({a!r}, {b!r}): the edge exists already")
        self._change_edge(a, b, add=True, kind=kind)

    def dependency_kind(self, a: Node, b: Node) -> str:
        """The kind of the edge from ``a`` to ``b`` (see ``add_dependency``).

        Raises:
            GraphError: If ``b`` does not wait for ``a`` directly.

        See also: cudaGraphGetEdges, cudaGraphNodeGetDependencies (their edge data).
        """
        self._edge_nodes(a, b, "dependency_kind")
        if self._index(a) not in self._current().deps_of(self._index(b)):
            raise GraphError(f"dependency_kind({a!r}, {b!r}): {b!r} does not wait for {a!r} directly")
        return self._backend.graph_dependency_kind(self._handle, a._handle, b._handle)

    def remove_dependency(self, a: Node, b: Node) -> None:
        """Remove the edge from ``a`` to ``b``. See also: cudaGraphRemoveDependencies."""
        self._edge_nodes(a, b, "remove_dependency")
        if self._memory:
            raise GraphError("remove_dependency: edges of a graph with allocation or free nodes cannot be removed")
        topology = self._current()  # (first: a capture recording into the graph may have moved the nodes)
        source, target = self._index(a), self._index(b)
        if source not in topology.deps_of(target):
            raise GraphError(f"remove_dependency({a!r}, {b!r}): there is no such edge")
        self._change_edge(a, b, add=False)

    # Changing and removing nodes

    def _own_node(self, node: Any, kinds: tuple[NodeKind, ...] | None, what: str) -> int:
        """The position of ``node``, checked to be a Node of this graph, still in it, of one of ``kinds`` (None: of any
        kind), at a time the graph's nodes may change."""
        if not isinstance(node, Node):
            raise TypeError(f"{what}(node): expected a Node, got {type(node).__name__}")
        self._check_in_graph(node, what)
        if kinds is not None and node.kind not in kinds:
            names = " or ".join(k.value for k in kinds)
            raise GraphError(f"{what}({node!r}): the node is a {node.kind.value} node, not a {names} node")
        if self._recording:
            raise GraphError(f"{what}: a capture records into this graph (Stream.capture(into=...)); change its "
                             f"nodes once the capture has ended")
        return self._index(node)

    def remove_node(self, node: Node) -> None:
        """Remove ``node`` and its edges: nodes that waited for it no longer do.

        Executable graphs made earlier keep the node; their setters refuse it from now on (CUDA's address an
        executable graph's nodes through the graph's). A child-graph node's embedded graph and a conditional node's
        bodies go with it: Graphs over them can no longer be used, and the conditional node's Condition is read by
        no node (an instantiate refuses it until another node reads it).

        Raises:
            GraphError: If the graph has allocation or free nodes (CUDA refuses it), a capture records into it, or
                an executable graph made from it patches the node's Params through it.

        See also: cudaGraphDestroyNode.
        """
        with self._locked():  # (checked under it: another thread's change would move the node)
            self._own_node(node, None, "remove_node")
            if self._memory:
                raise GraphError(f"remove_node({node!r}): nodes of a graph with allocation or free nodes cannot be "
                                 f"removed (CUDA refuses it)")
            handle = node._handle
            for exe in list(self._execs):
                if exe._patches(self, handle):
                    raise GraphError(f"remove_node({node!r}): {exe!r}, made from this graph, patches the node's "
                                     f"Params through it; close that executable graph first")
            self._begin_change()
            i = self._index(node)

            def remove() -> None:  # (whole or not at all: the backend may give its handle to the next node)
                self._backend.graph_destroy_node(self._handle, handle)
                for exe in list(self._execs):
                    exe._node_removed(self, handle)
                node._handle = Removed()
                self._forget(handle, i)

            without_interrupts(remove)
            self._end_change()

    def _forget(self, handle: Any, i: int) -> None:
        """Drop what the graph keeps of the node ``handle`` at position ``i``, which the backend has removed."""
        record = self._topology.records[i]
        self._topology.remove(i)
        self._nodes.pop(handle, None)
        for other in self._nodes.values():
            if other._i > i:
                other._i -= 1
        if record.kind is NodeKind.GRAPH and self._children is not None:
            child = self._children.pop(handle, None)
            if child is not None:
                child._die("was embedded in a node that was removed from its graph (remove_node)")
        elif record.kind is NodeKind.CONDITIONAL:
            for body in self._bodies.pop(handle, ()):
                body._die("was a body of a conditional node that was removed from its graph (remove_node)")
            record.condition._node = None
        if self._cloned:  # (a clone's node: the original's counterpart of it has none now)
            gone = Removed()
            self._cloned = {number: gone if type(copy) is not Removed and copy == handle else copy
                            for number, copy in self._cloned.items()}

    def _die(self, why: str) -> None:
        """The backend graph under this Graph went with the node that embedded it (``why``: how); every later use is
        refused."""
        self._dead = f"this graph (of {self.device}) {why}, and went with it; it can no longer be used"
        self._stale = True  # (every reading goes through _load, which refuses it)
        for graph in [*(self._children.values() if self._children is not None else ()),
                      *(body for bodies in self._bodies.values() for body in bodies)]:
            graph._die(why)

    def _set_record(self, node: Node, record: Any) -> None:
        """Give ``node`` (checked by ``_own_node``, under ``_locked``) the parameter record ``record``, in the backend
        and the Topology."""
        self._begin_change()
        i = self._index(node)

        def set_record() -> None:  # (whole or not at all: a reading again would keep the old record)
            self._backend.graph_set_node(self._handle, node._handle, record)
            self._topology.set_record(i, record)
            node._record = record

        without_interrupts(set_record)
        self._end_change()

    def set_params(self, node: Node, *args: Any, grid: Any = None, block: Any = None, shared_mem: int | None = None,
                   kernel: Kernel | None = None) -> None:
        """Change a kernel node's arguments (all of them, or none to keep them), launch shape, shared memory or
        kernel, with the rules of ``add_kernel``. Executable graphs made earlier keep what they were made with.

        See also: cudaGraphKernelNodeSetParams.
        """
        with self._locked():
            i = self._own_node(node, (NodeKind.KERNEL,), "set_params")
            old = self._topology.records[i]
            device = self.device._sibling(old.device)
            record = kernel_record(old, args, grid, block, shared_mem, kernel, device, self, "set_params")
            self._refuse_body_params(record, "set_params")
            if (record.grid, record.block, record.shared_mem, record.kernel) != (old.grid, old.block, old.shared_mem,
                                                                                 old.kernel):
                attributes = self._backend.node_attributes(self._handle, node._handle)
                self._check_launch(node, attributes, record, "set_params")
            self._set_record(node, record)
            record.kernel.bind_params(record.args)

    # Kernel node attributes

    def _attributes_of(self, node: Node, what: str) -> KernelAttributes:
        """The attributes of kernel node ``node`` of this graph."""
        with self._locked():
            if node.kind is not NodeKind.KERNEL:
                raise GraphError(f"{what}: {node!r} is a {node.kind.value} node; only kernel nodes have attributes")
            self._check_in_graph(node, what)
            return self._backend.node_attributes(self._handle, node._handle)

    def _check_launch(self, node: Node, attributes: KernelAttributes, record: KernelParams, what: str) -> None:
        """Refuse a kernel node of ``attributes`` launching as ``record`` says (``_attributes.launch_refusal``)."""
        device = self.device._sibling(record.device)
        if attributes.cooperative and type(record.kernel) is not Kernel:
            raise ValueError(f"{what}({node!r}): the node is cooperative, and gpugraph cannot tell how many blocks of "
                             f"another library's kernel ({record.kernel.name}) the device holds at once")
        refusal = launch_refusal(attributes, record.grid, record.block, lambda: device._cooperative_blocks(
            record.kernel, record.block, record.shared_mem))
        if refusal is not None:
            raise ValueError(f"{what}({node!r}): {refusal}")

    def set_attributes(self, node: Node, *, priority: int = _KEEP, cooperative: bool = _KEEP,
                       access_policy_window: Any = _KEEP, cluster_dims: Any = _KEEP,
                       mem_sync_domain: str = _KEEP) -> None:
        """Change attributes of a kernel node (those given; see ``KernelAttributes``). Executable graphs made earlier
        keep what they were made with; ``GraphExec.update`` takes them, but for ``cooperative``, and ``priority``
        where the executable graph was instantiated with ``use_node_priority``.

        Raises:
            TypeError, ValueError: If a value breaks its rule (``KernelAttributes``), or the node's launch shape does
                not fit them (cluster dims that do not divide its grid; a cooperative grid larger than the device
                holds at once).
            GraphError: If the node is not a kernel node of this graph.

        See also: cudaGraphKernelNodeSetAttribute.
        """
        changes = {"priority": priority, "cooperative": cooperative, "access_policy_window": access_policy_window,
                   "cluster_dims": cluster_dims, "mem_sync_domain": mem_sync_domain}
        with self._locked():
            i = self._own_node(node, (NodeKind.KERNEL,), "set_attributes")
            record = self._topology.records[i]
            old = self._backend.node_attributes(self._handle, node._handle)
            new = attributes_with(old, changes, self.device._sibling(record.device)._attribute_limits(),
                                  "set_attributes")
            self._check_launch(node, new, record, "set_attributes")
            if new != old:
                self._begin_change()
                attributes_changing(self, node._handle, old)
                without_interrupts(lambda: self._backend.node_set_attributes(self._handle, node._handle, new))
                self._end_change()

    def copy_attributes(self, src: Node, dst: Node) -> None:
        """Give kernel node ``dst`` of this graph the attributes of kernel node ``src`` (of any graph of the same
        device), with the rules of ``set_attributes``.

        See also: cudaGraphKernelNodeCopyAttributes.
        """
        if not isinstance(src, Node):
            raise TypeError(f"copy_attributes(src): expected a Node, got {type(src).__name__}")
        attributes = src.graph._attributes_of(src, "copy_attributes(src)")
        source = src.params
        with self._locked():
            i = self._own_node(dst, (NodeKind.KERNEL,), "copy_attributes")
            record = self._topology.records[i]
            if src.graph.device.backend != self.device.backend or source.device != record.device:
                raise ValueError(f"copy_attributes({src!r}, {dst!r}): the nodes run on different devices "
                                 f"({src.graph.device._sibling(source.device)} and "
                                 f"{self.device._sibling(record.device)})")
            self._check_launch(dst, attributes, record, "copy_attributes")
            old = self._backend.node_attributes(self._handle, dst._handle)
            self._begin_change()
            attributes_changing(self, dst._handle, old)
            without_interrupts(lambda: self._backend.node_copy_attributes(self._handle, dst._handle,
                                                                          src.graph._handle, src._handle))
            self._end_change()

    def set_memcpy(self, node: Node, dst: Any, src: Any, nbytes: int | None = None, *, shape: Any = None,
                   dst_origin: Any = None, src_origin: Any = None) -> None:
        """Change a copy node, with the rules of ``add_memcpy``. See also: cudaGraphMemcpyNodeSetParams."""
        record = memcpy_record(self.device, dst, src, nbytes, "set_memcpy", shape=shape, dst_origin=dst_origin,
                               src_origin=src_origin)
        with self._locked():
            self._own_node(node, (NodeKind.MEMCPY,), "set_memcpy")
            self._set_record(node, record)

    def set_memset(self, node: Node, dst: Array, value: Any, count: int | None = None, *, shape: Any = None,
                   origin: Any = None) -> None:
        """Change a memset node, with the rules of ``add_memset``; ``dst`` is on the device of the memory the node
        set (a memset node runs there). See also: cudaGraphMemsetNodeSetParams."""
        record = memset_record(self.device, dst, value, count, "set_memset", shape=shape, origin=origin)
        with self._locked():
            i = self._own_node(node, (NodeKind.MEMSET,), "set_memset")
            was, now = getattr(self._topology.records[i].dst, "device", None), getattr(dst, "device", None)
            if isinstance(was, Device) and isinstance(now, Device) and was is not now:
                raise GraphError(f"set_memset({node!r}): the node sets memory of {was}, where it runs, and dst is on "
                                 f"{now}; add a memset node for that memory instead")
            self._set_record(node, record)

    def set_host(self, node: Node, fn: Callable[..., Any], *args: Any) -> None:
        """Change a host node's callable and arguments. See also: cudaGraphHostNodeSetParams."""
        record = host_record(fn, args, "set_host")
        with self._locked():
            self._own_node(node, (NodeKind.HOST,), "set_host")
            self._set_record(node, record)

    def set_event(self, node: Node, event: Event) -> None:
        """Change the event of an event record or wait node, with the rules of ``add_event_record`` and
        ``add_event_wait``.

        See also: cudaGraphEventRecordNodeSetEvent, cudaGraphEventWaitNodeSetEvent.
        """
        with self._locked():
            self._own_node(node, (NodeKind.EVENT_RECORD, NodeKind.EVENT_WAIT), "set_event")
            self._set_record(node, event_record(self.device, node.kind, event, "set_event"))

    def set_semaphores(self, node: Node, semaphores: Any, values: Any = None) -> None:
        """Change the semaphores and values of a semaphore signal or wait node, with the rules of
        ``add_semaphore_signal`` and ``add_semaphore_wait``.

        See also: cudaGraphExternalSemaphoresSignalNodeSetParams, cudaGraphExternalSemaphoresWaitNodeSetParams.
        """
        with self._locked():
            self._own_node(node, SEMAPHORE_KINDS, "set_semaphores")
            self._set_record(node, semaphore_record(self.device, node.kind, semaphores, values, "set_semaphores"))

    def set_mem_ops(self, node: Node, ops: Any) -> None:
        """Change the operations of a batch memory-op node, with the rules of ``add_mem_ops``.

        See also: hipGraphBatchMemOpNodeSetParams, cuGraphBatchMemOpNodeSetParams.
        """
        record = mem_ops_record(self.device, ops, "set_mem_ops")
        with self._locked():
            self._own_node(node, (NodeKind.MEM_OPS,), "set_mem_ops")
            self._set_record(node, record)

    def set_child_graph(self, node: Node, graph: Graph) -> None:
        """Make a child-graph node embed a copy of ``graph``, taken now (of any topology), with the rules of
        ``add_child``. A Graph over the copy it embedded before (``node.params.graph``) can no longer be used.

        See also: cudaGraphNodeSetParams (a child-graph node's parameters).
        """
        self._check_child(graph, "set_child_graph")
        refusal = nesting_refusal(self, graph)
        if refusal is not None:
            raise GraphError(f"set_child_graph: {refusal}")
        with self._locked():
            self._own_node(node, (NodeKind.GRAPH,), "set_child_graph")
            self._begin_change()
            i, backend = self._index(node), self._backend

            def set_child() -> None:  # (whole or not at all: the node embeds a new copy)
                backend.graph_set_node(self._handle, node._handle, ChildGraphParams(graph._handle))
                record = backend.node_params(self._handle, node._handle)  # (the copy the node embeds now)
                self._topology.set_record(i, record)
                self._topology.children[i] = Topology.copy_of(graph._current(), backend, record.graph)
                node._record = record
                old = self._children.pop(node._handle, None) if self._children is not None else None
                if old is not None:
                    old._die("was embedded in a child-graph node that set_child_graph gave another graph")

            without_interrupts(set_child)
            self._end_change()

    # User objects

    def retain_user_object(self, obj: UserObject, count: int = 1, move: bool = False) -> None:
        """Let the graph hold ``count`` references to ``obj``: new ones, or, with ``move``, the caller's. Its clones,
        child-graph nodes embedding it and executable graphs made from it hold them too, until their work is done.

        Raises:
            GraphError: If ``obj`` is of another backend, or the caller holds no reference (fewer than ``count``
                with ``move``).

        See also: cudaGraphRetainUserObject (cudaGraphUserObjectMove).
        """
        if type(obj) is not UserObject:
            raise TypeError(f"retain_user_object(obj): expected a UserObject (Device.user_object), got "
                            f"{type(obj).__name__}")
        count = count_of(count, "retain_user_object")
        if as_bool(move) is None:
            raise TypeError(f"retain_user_object(move): expected a bool, got {describe(move)}")
        move = bool(move)
        if obj._backend is not self._backend:
            raise GraphError(f"retain_user_object: {obj!r} is of another backend than {self!r}")
        if HOST_THREADS:
            refuse_in_host_function("Graph.retain_user_object")
        self._current()  # (refuses a graph that went with its node)
        with obj._lock, self._lock:
            if move:
                obj._give(count, "retain_user_object")
            else:
                obj._check_held("retain_user_object")
            try:
                self._backend.graph_retain_user_object(self._handle, obj._handle, count, move)
            except Exception:  # (refused: the caller keeps them; an interrupt may come after the driver took them)
                if move:
                    obj._held[0] += count
                raise
            self._user_objects[obj] = self._user_objects.get(obj, 0) + count

    def release_user_object(self, obj: UserObject, count: int = 1) -> None:
        """Release ``count`` of the references the graph holds to ``obj`` (its copies and executable graphs keep
        theirs).

        Raises:
            GraphError: If the graph holds fewer than ``count``.

        See also: cudaGraphReleaseUserObject.
        """
        if type(obj) is not UserObject:
            raise TypeError(f"release_user_object(obj): expected a UserObject, got {type(obj).__name__}")
        count = count_of(count, "release_user_object")
        if HOST_THREADS:
            refuse_in_host_function("Graph.release_user_object")
        self._current()
        with self._lock:
            held = self._user_objects.get(obj, 0)
            if count > held:
                raise GraphError(f"release_user_object({obj!r}, {count}): the graph holds {held} reference(s)")
            self._backend.graph_release_user_object(self._handle, obj._handle, count)
            if held == count:
                del self._user_objects[obj]
            else:
                self._user_objects[obj] = held - count

    # Queries

    @property
    def id(self) -> int:
        """The graph's id, unique in the process, as the driver's DOT dump names it (CUDA 13.1; on an older
        driver BackendError). See also: cudaGraphGetId."""
        self._current()  # (refuses a graph that went with its node)
        return self._backend.graph_id(self._handle)

    def _node_ids(self, node: Node) -> tuple[int, int]:
        self._index(node)  # (refuses a node no longer in the graph)
        return self._backend.node_ids(self._handle, node._handle)

    @property
    def nodes(self) -> tuple[Node, ...]:
        """All nodes, in creation order. See also: cudaGraphGetNodes."""
        return tuple(map(self._node, self._current().handles))

    @property
    def edges(self) -> tuple[tuple[Node, Node], ...]:
        """All edges as (from, to) pairs. See also: cudaGraphGetEdges."""
        topology = self._current()
        node, handles = self._node, topology.handles
        return tuple((node(handles[d]), node(handles[i])) for i, deps in enumerate(topology.deps) for d in deps)

    @property
    def roots(self) -> tuple[Node, ...]:
        """Nodes with no dependencies. See also: cudaGraphGetRootNodes."""
        topology = self._current()
        return tuple(self._node(h) for h, deps in zip(topology.handles, topology.deps) if not deps)

    @property
    def leaves(self) -> tuple[Node, ...]:
        """Nodes nothing depends on."""
        topology = self._current()
        waited_for = {dep for deps in topology.deps for dep in deps}
        return tuple(self._node(h) for i, h in enumerate(topology.handles) if i not in waited_for)

    def __len__(self) -> int:
        return len(self._current())

    def clone(self) -> Graph:
        """A copy of the graph; ``copy.find(node)`` maps this graph's nodes to the copy's.

        See also: cudaGraphClone.
        """
        if HOST_THREADS:
            refuse_in_host_function("Graph.clone")
        if self._memory:
            raise GraphError("clone: a graph with allocation or free nodes cannot be cloned")
        if self._holds(NodeKind.CONDITIONAL):
            raise GraphError(f"clone: {self!r} holds conditional nodes; a graph with conditional nodes cannot be "
                             f"cloned (CUDA refuses it); build it again instead")
        # The copy is described from this graph (creation order, which a clone keeps), not read node by node.
        backend, topology = self._backend, self._current()
        handle = backend.graph_clone(self._handle)
        copy = Graph._wrap(self.device, handle, topology=Topology.copy_of(topology, backend, handle))
        copy._clone_of = weakref.ref(self)
        copy._user_objects = dict(self._user_objects)  # (the backend's clone holds references of its own)
        # (By node number, which no later node takes, where a handle may be: the backend reuses a removed node's.)
        copy._cloned = dict(zip(map(topology.number, range(len(topology))), copy._topology.handles))
        return copy

    def find(self, node: Node) -> Node:
        """The node of this clone that corresponds to ``node`` of the original graph.

        Raises:
            GraphError: If this graph is not a clone, ``node`` is not a node of the original, it was added to
                the original after the clone was made (it has no counterpart here), or either node was removed.

        See also: cudaGraphNodeFindInClone.
        """
        original = self._clone_of() if self._clone_of is not None else None
        if original is None:
            raise GraphError("find: this graph is not a clone")
        if not isinstance(node, Node) or node.graph is not original:
            raise GraphError(f"find: {node!r} is not a node of the graph this one was cloned from")
        if type(node._handle) is Removed:
            raise GraphError(f"find: {node!r} was removed from the graph this one was cloned from (remove_node)")
        copy = self._cloned.get(node._number)
        if type(copy) is Removed:
            raise GraphError(f"find: the counterpart of {node!r} in this clone was removed (remove_node)")
        if copy is None:
            raise GraphError(f"find: {node!r} was added to the original graph after this clone was made, "
                             f"so the clone has no counterpart of it")
        return self._node(copy)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT format."""
        return to_dot(self)

    def debug_dot_print(self, path: str | os.PathLike[str], flags: Iterable[str] = ()) -> None:
        """Write the backend's own DOT description of the graph to the file ``path``: the driver's on CUDA, with what
        ``flags`` (names of ``gpugraph.DOT_FLAGS``: "verbose", "kernel_node_params", ...) add; gpugraph's
        ``to_dot`` on the CPU backend, which has no driver (the flags are checked and add nothing there).

        See also: cudaGraphDebugDotPrint.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"debug_dot_print(path): expected a str or path, got {type(path).__name__}")
        if isinstance(flags, str):
            raise TypeError(f"debug_dot_print(flags): expected an iterable of flag names, got the str {flags!r}")
        flags = tuple(flags)
        unknown = [flag for flag in flags if flag not in DOT_FLAGS]
        if unknown:
            raise ValueError(f"debug_dot_print(flags): unknown flag {unknown[0]!r}; the flags are "
                             f"{', '.join(DOT_FLAGS)}")
        path = os.fspath(path)
        self._current()  # (refuses a graph that went with its node)
        if HOST_THREADS:
            refuse_in_host_function("Graph.debug_dot_print")
        if not self._backend.graph_debug_dot(self._handle, path, flags):
            with open(path, "w") as file:
                file.write(to_dot(self))

    def instantiate(self, upload: Any = None, auto_free_on_launch: bool = False, *, use_node_priority: bool = False,
                    device_launch: bool = False) -> Any:
        """Create an executable graph.

        Args:
            upload: A Stream to upload the executable graph on right away, or None.
            auto_free_on_launch: Free the graph's unfreed allocations of the previous launch when it is
                launched again (cudaGraphInstantiateFlagAutoFreeOnLaunch).
            use_node_priority: Run kernel nodes at their own priority, not the launch stream's (a captured
                kernel takes its stream's: cudaGraphInstantiateFlagUseNodePriority).
            device_launch: Make it launchable from the device (cudaGraphInstantiateFlagDeviceLaunch): the graph
                holds only kernel, memcpy, memset and child-graph nodes, on one device. Each change of the
                executable graph (setters, set_enabled, update) uploads it again, as kernels launch it as last
                uploaded: should that fail, the change stays, the call raises GraphError, and kernels launch it as
                last uploaded until its next launch, change or kernel argument uploads it.

        Raises:
            GraphInstantiateError: The graph breaks a rule of instantiation; ``node`` names the node at fault.

        ``GraphExec.flags`` reads the flags back. See also: cudaGraphInstantiateWithParams.
        """
        flags = instantiate_flags(auto_free_on_launch, device_launch, use_node_priority)
        if self._dead is not None:
            raise GraphError(f"instantiate: {self._dead}")
        if self._in_body():
            raise GraphError(f"instantiate: this graph is a body of a conditional node of {self._owner!r}; it "
                             f"belongs to that node and cannot be instantiated alone (CUDA refuses it)")
        if self._owner is not None:
            raise GraphError(f"instantiate: this graph is the one embedded in a child-graph node of {self._owner!r}; "
                             f"it belongs to that node and cannot be instantiated (CUDA refuses it); "
                             f"instantiate a copy made with .clone() instead")
        if self._memory and len(self._live_execs):
            raise GraphError("instantiate: a graph with allocation or free nodes may have only one "
                             "executable graph at a time; close the other one first")
        if upload is not None:
            check_stream(upload, self.device, "instantiate", "upload")
        conditional = self._holds(NodeKind.CONDITIONAL)
        if conditional or self._conditions:  # (CUDA refuses an unused condition with no conditional node too)
            self._check_conditional_instantiate()
        if device_launch:
            check_device_launch(self)
        if HOST_THREADS:
            refuse_in_host_function("Graph.instantiate")
        _capture_rules.forbid_unsafe("Graph.instantiate", _capture_rules.INSTANTIATE_RULE)
        exe = GraphExec(self, flags, Graph)
        if self._memory or conditional:
            self._live_execs.add(exe)
        if conditional:  # (its bodies may change later: the executable graph keeps what they are now)
            exe._read_layout()
        if upload is not None:
            try:
                exe.upload(upload)
            except BaseException:
                exe.close()
                raise
        return exe

    def __repr__(self) -> str:
        if self._dead is not None:
            return f"Graph(device={self.device}, removed with the node that embedded it)"
        return f"Graph(device={self.device}, nodes={len(self)})"


_capture.graph_type = Graph  # (a capture makes and records into Graphs: see gpugraph._capture)
