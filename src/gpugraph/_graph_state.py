"""GraphState: the state of a Graph, which each of its concerns reads and changes, and what they share.

A Graph is this state and the concerns that ``gpugraph._graph`` combines with it, one mixin each:
building (``_graph_build``), editing (``_graph_edit``), conditional nodes (``_graph_conditional``), graph
memory (``_graph_alloc``) and queries (``_graph_query``). The mixins keep no state of their own: every field is
one of the slots here. What more than one of them uses is here too: the change protocol (locks, watchers,
``_begin_change`` / ``_end_change``), reading the backend graph (``_load``), finding nodes, adding a node
(``_add``, ``_adopt``), the Graphs over child graphs and bodies, and the rules every added or changed node obeys (a
conditional node's body, conditions, child graphs).

Executable graphs, instantiate and update (``_exec``, ``_instantiate``, ``_update``) read a graph through
``gpugraph._graph_reads``; an executable graph tells the graph what it follows, and the graph tells it of a node
removed, through the few private methods at the end here.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ._conditions import Condition, condition_args, condition_value
from ._device_like import DeviceLike
from ._errors import GraphError
from ._exec_state import ExecState, before_change, node_removed, patches
from ._graph_node import Node, place, position_of
from ._host_threads import HOST_THREADS, refuse_in_host_function
from ._nodes import BODY_KINDS, MEMORY_KINDS, KernelParams, NodeKind, why_gone
from ._params import Param
from ._scalars import describe
from ._topology import Topology
from ._user_objects import UserObject
from .backends import get_backend

if TYPE_CHECKING:
    from ._graph import Graph


class _ChainLock:
    """The locks of a graph and of the graphs embedding it, taken outermost first: the order in which a change of an
    embedded graph, which tells the graphs embedding it, and a reading of an owner, which reads what it embeds,
    both take them."""

    __slots__ = ("_locks",)

    def __init__(self, graph: GraphState) -> None:
        locks = []
        owner: GraphState | None = graph
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


class GraphState:
    """The fields of a Graph (its slots) and the methods its concerns share; never made alone (a Graph is one)."""

    __slots__ = ("device", "_backend", "_handle", "_fast", "_topology", "_nodes", "_children", "_owner",
                 "_owner_node", "_bodies", "_conditions",
                 "_recording", "_stale", "_lock", "_live_execs", "_execs", "_clone_of", "_cloned", "_version",
                 "_watchers", "_dead", "_user_objects", "__weakref__")

    # The class of the Graphs gpugraph makes (clones, child graphs, bodies, captured graphs): gpugraph's own Graph,
    # not a user's subclass of it, whose __init__ would not run for them. Set by gpugraph._graph on Graph itself.
    _made: ClassVar[type[Graph]]

    def _setup(self, device: DeviceLike, handle: Any, owner: GraphState | None) -> None:
        self.device: Any = device  # (a Device: not named here, since gpugraph._device imports this module)
        self._backend = get_backend(device.backend)
        self._handle = handle
        # The compiled lane of add_kernel, or None (it reads this object's fields: see cuda._fast.Builder). Not
        # for a child graph, whose changes the Python path tells its owner about.
        self._fast = self._backend.graph_builder(handle, device) if owner is None else None
        self._topology = Topology()  # the nodes, their records and edges: the graph's one record of them
        # The Node objects handed out, by backend handle: made when first asked for, kept (a node is one object).
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
        # Changes (a backend call and the Topology's note) and readings take turns: threads see one order of nodes.
        self._lock = threading.RLock()
        self._live_execs: weakref.WeakSet = weakref.WeakSet()
        # Every executable graph made from this graph, or updated from it: told when a node is removed.
        self._execs: weakref.WeakSet = weakref.WeakSet()
        # Why the graph can no longer be used, or None: it was embedded in a node removed (with the backend graph).
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

    def _watch(self, exe: object) -> None:
        """Call ``before_change(exe, self)`` (``gpugraph._exec_state``) before this graph next changes."""
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
                    before_change(exe, self)

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
        self._tell_owners()
        self._stale = True
        if self._owner is not None:
            self._owner._keep_child(self._owner_node, None)
        return positions

    def _tell_owners(self) -> None:
        """Before a change: the graphs embedding this one change too (their executable graphs read them first)."""
        owner = self._owner
        while owner is not None:
            owner._version += 1
            owner._tell_watchers()
            owner = owner._owner

    def _end_change(self) -> None:
        """The Topology has noted the change ``_begin_change`` announced."""
        self._stale = self._recording > 0
        if self._owner is not None:
            self._owner._keep_child(self._owner_node, self._topology)

    @classmethod
    def _wrap(cls, device: DeviceLike, handle: Any, owner: GraphState | None = None, own: bool = True,
              recording: bool = False, topology: Topology | None = None, owner_node: Any = None) -> Graph:
        """A Graph (gpugraph's own class, ``_made``, whatever ``cls`` is) over an existing backend graph, read now (its
        edges when first needed) unless given its Topology.

        Args:
            owner: The graph whose child-graph node embeds this one, for borrowed child graphs.
            own: Whether the wrapper destroys the backend graph when collected (see ``_take``).
            recording: The backend graph is a capture's, being recorded: it is read when first needed.
            topology: The backend graph's Topology, read already (a child graph's): taken, not read.
            owner_node: The handle of the child-graph node of ``owner`` that embeds the graph.
        """
        graph = object.__new__(cls._made)
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
                position = self._topology.position
                self._nodes = {handle: node for handle, node in self._nodes.items() if handle in position}
                for handle, node in self._nodes.items():
                    place(node, position[handle])
            if self._bodies:  # a dropped conditional node's bodies and condition go with it
                position = self._topology.position
                for handle in [h for h in self._bodies if h not in position]:
                    del self._bodies[handle]
                graph: GraphState | None = self
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

    # Finding nodes

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
        i, handles = position_of(node), self._topology.handles
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

    def _has_node(self, node: object) -> bool:
        """Whether ``node`` is a Node of this graph that is still in it (``remove_node`` takes one out)."""
        return isinstance(node, Node) and node.graph is self and self._has(node)

    def _locate(self, nodes: list[Node], what: str) -> list[int]:
        """The positions of ``nodes`` (from ``_deps``); GraphError naming ``what`` if one is no longer in the
        graph. Before a change, under the graph's lock (positions move only when the graph is read anew)."""
        handles = self._topology.handles
        count = len(handles)
        positions = []
        for node in nodes:
            i = position_of(node)
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
            graph = self._wrap(self.device, topology.records[i].graph, owner=self, owner_node=handle,
                                topology=topology.children.get(i))
            topology.children[i] = graph._topology
            self._children[handle] = graph
        return graph

    def _body_graphs(self, node: Node) -> tuple[Graph, ...]:
        """The Graphs over the bodies of the conditional node ``node`` (made when first asked for)."""
        bodies = self._bodies.get(node._handle)
        if bodies is None:
            with self._lock:
                bodies = self._bodies.get(node._handle)
                if bodies is None:
                    record = self._current().records[self._index(node)]
                    bodies = tuple(self._wrap(self.device, handle, owner=self, topology=Topology())
                                   for handle in record.bodies)
                    self._bodies[node._handle] = bodies
        return bodies

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

    def _reaches(self, source: Node, targets: Iterable[Node]) -> bool:
        """Whether any of ``targets`` (Nodes of this graph) is ``source`` or depends on it, directly or not."""
        topology = self._current()
        return topology.reaches(self._index(source), [self._index(node) for node in targets])

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

    # Adding a node (every add_* method's last step)

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

    # The rules every added or changed node obeys (its graph may be a conditional node's body)

    def _check_child(self, graph: object, what: str) -> None:
        """Refuse ``graph`` as the graph a child-graph node of this graph embeds a copy of (but for the nesting
        limit: ``nesting_refusal``)."""
        if not isinstance(graph, GraphState):
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

    def _condition_values(self, args: tuple, api: str, kernel: object) -> tuple:
        """A kernel node's ``args`` with each Condition among them (checked: this graph's, or one of a graph it is
        a body of) replaced by the value its kernel is passed (the backend's handle); ``args`` when none is.
        ``api`` and ``kernel`` name the call in errors (``api(kernel)``: made only then, a repr being no free)."""
        conditions = condition_args(args)
        if not conditions:
            return args
        for condition in conditions:
            self._check_condition(condition, f"{api}({kernel!r})")
        return tuple(np.uint64(condition_value(a)) if type(a) is Condition else a for a in args)

    def _refuse_body_params(self, record: KernelParams, what: str) -> None:
        if self._in_body() and any(type(a) is Param for a in record.args):
            raise GraphError(f"{what}({record.kernel!r}): {self!r} is the body of a conditional node, and a Param is "
                             f"patched by an executable graph's setters, which take no node of a body (CUDA's); "
                             f"pass the value, or change the body with exe.update")

    def _check_condition(self, condition: Condition, what: str) -> None:
        """Refuse ``condition`` unless it was made by this graph or by a graph this one is a body of."""
        graph: GraphState | None = self
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

    # The executable graphs following the graph: what they tell it (private: each changes whom the graph tells, or
    # the graph itself), and what it tells them of a node removed

    def _followed_by(self, exe: object, updated: bool) -> None:
        """The executable graph ``exe`` was made from this graph, or ``updated`` with it: the graph tells it before it
        next changes (``_watch``) and when a node is removed or a kernel node's attributes change (``_execs``). An
        executable graph updated with a graph that has conditional nodes is that graph's one live one: their
        conditions drive it (``Graph.instantiate`` notes those it makes)."""
        if updated and self._bodies:
            self._live_execs.add(exe)
        self._execs.add(exe)
        self._watch(exe)

    def _let_go(self, exe: object) -> None:
        """The executable graph ``exe`` was closed: it no longer counts as the graph's one live executable graph."""
        self._live_execs.discard(exe)

    def _patched_by(self, handle: object) -> ExecState | None:
        """An executable graph made from this graph that patches Params through its node ``handle``, or None."""
        return next((exe for exe in list(self._execs) if patches(exe, self, handle)), None)

    def _tell_removed(self, handle: object) -> None:
        """The node ``handle`` is being removed: every executable graph made from the graph, or updated from it, is
        told (its setters refuse the node from now on)."""
        for exe in list(self._execs):
            node_removed(exe, self, handle)

    def _drives_another(self, exe: object) -> bool:
        """Whether the graph's conditions drive an executable graph other than ``exe`` (CUDA lets one executable graph
        of a graph with conditional nodes live at a time)."""
        return bool(self._conditions) and any(other is not exe for other in self._live_execs)

    def _following_top(self) -> tuple[GraphState, list[ExecState]]:
        """The graph embedding this one at the top (this one, if none embeds it), and the executable graphs made from
        it or updated with it: those whose layout may hold this graph's nodes."""
        top = self
        while top._owner is not None:
            top = top._owner
        return top, list(top._execs)

    def _note_embedded(self, handle: object, source: GraphState) -> None:
        """A launch of an executable graph into a capture recording into this graph embedded a copy of its graph
        ``source`` as the child-graph node ``handle`` (now the capture's frontier): the node is noted, and described
        from ``source``'s Topology (as ``add_child`` does), not from the backend's node-by-node read-back."""
        i = self._note_recorded(handle)
        topology = self._topology
        topology.children[i] = Topology.copy_of(source._current(), self._backend, topology.records[i].graph)
