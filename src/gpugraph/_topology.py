"""A graph's topology as gpugraph keeps it: its nodes in creation order, their parameter and allocation
records, and its edges, as lists indexed by position.

``Graph`` owns one and keeps it as nodes and edges are added; what a capture recorded is read from the
backend once (``Topology.read``: its nodes at once, its edges when first needed). Positions, not objects,
name the nodes here: nothing in a Topology points back at its Graph, so a graph nobody holds is freed at
once, not left to the cycle collector.

A core module (``_core``): compiled where gpugraph was built with Cython, ``Topology`` is a C class whose fields
``_topology.pxd`` declares; plain, a Python class with the same fields as slots.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ._nodes import MEMORY_KINDS, NodeKind

if TYPE_CHECKING:
    from .backends._protocol import Backend, Handle

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from . import _cython as cython


@cython.cclass
class Topology:
    """Nodes by position in creation order; ``deps_of(i)`` are the positions node ``i`` waits for."""

    if not cython.compiled:  # (compiled, _topology.pxd declares the fields)
        __slots__ = ("handles", "_position", "records", "renamed", "numbered", "_deps", "allocs", "children",
                     "memory", "_shape", "_nested", "_recorded", "unread")

    def __init__(self) -> None:
        self.handles: list[Any] = []  # backend node handles
        self._position: dict[Any, int] | None = None  # handle -> position, made when first asked for
        # The parameter record the backend was given or reported (replaced only by the graph's setters); for
        # a child-graph node, ChildGraphParams of the backend graph the node embeds.
        self.records: list[Any] = []
        # Each node's name (n0, n1, ...) is its number, for good, whatever is removed before it: its position,
        # but for those listed here (position -> number) once a removal moved them.
        self.renamed: dict[int, int] = {}
        self.numbered = 0  # how many numbers were given: the next new node takes this one
        # Each node's dependencies: the position of its one dependency (the common case, kept without a tuple),
        # else a tuple of them (none, or several).
        self._deps: list[int | tuple[int, ...]] = []
        self.allocs: dict[int, Any] = {}  # allocation and free nodes' allocation records (the backend's)
        # Child-graph node position -> the Topology of the graph it embeds, once read (see Graph._child).
        self.children: dict[int, Topology] = {}
        self.memory = False  # whether any node allocates or frees
        self._shape: tuple[int | tuple[int, ...], ...] | None = None  # shape(), until the topology changes
        self._nested: tuple[int, list[int]] = (0, [])  # nested(): (how many records it has looked at, positions)
        self._recorded: tuple[int, list[Any]] = (0, [])  # recorded_events(): (records looked at, events)
        self.unread: tuple[Any, Any] | None = None  # (backend, graph) whose edges are still to be read

    def __len__(self) -> int:
        return len(self.handles)

    @property
    def deps(self) -> list[tuple[int, ...]]:
        """Each node's dependencies, as tuples of positions (made for a walk over the whole graph)."""
        if self.unread is not None:
            self.read_edges()
        return [(d,) if type(d) is int else d for d in self._deps]  # type: ignore[misc]  # (mypy: no narrowing on type())

    def deps_of(self, i: int) -> tuple[int, ...]:
        """The positions node ``i`` waits for (the edges are read from the backend on first use after ``read``)."""
        if self.unread is not None:
            self.read_edges()
        d = self._deps[i]
        return (d,) if type(d) is int else d  # type: ignore[return-value]

    def _set_deps(self, i: int, deps: tuple[int, ...]) -> None:
        self._deps[i] = deps[0] if len(deps) == 1 else deps
        self._shape = None

    @property
    def position(self) -> dict[Any, int]:
        """Node handle -> position."""
        if self._position is None:
            self._position = dict(zip(self.handles, itertools.count()))
        return self._position

    def number(self, i: int) -> int:
        """The number (the name) of the node at position ``i``."""
        return self.renamed.get(i, i) if self.renamed else i

    def dependents(self, i: int) -> list[int]:
        """The positions of the nodes that wait for node ``i`` (found by a walk: rarely asked)."""
        if self.unread is not None:
            self.read_edges()
        return [j for j, d in enumerate(self._deps) if d == i or (type(d) is tuple and i in d)]

    def add(self, handle: Any, record: Any, deps: Sequence[int], alloc: Any = None) -> int:
        """Note a new node after the nodes at positions ``deps``, and return its number. ``alloc``: an
        allocation or free node's allocation record."""
        if self.unread is not None:
            self.read_edges()
        i = len(self.handles)
        self._shape = None
        self.records.append(record)
        count = len(deps)  # (one dependency is the common case: kept without a tuple)
        self._deps.append(deps[0] if count == 1 else tuple(deps) if count else ())
        number = self.numbered
        if number != i:
            self.renamed[i] = number
        if alloc is not None:
            self.memory = True
            self.allocs[i] = alloc
        self.numbered = number + 1  # (first: a number an interrupt leaves unused is never given twice)
        # Last: a node an interrupt cut short of these two is not in the Topology.
        self.handles.append(handle)
        if self._position is not None:  # (kept only once asked for: Nodes know their positions)
            self._position[handle] = i
        return number

    def remove(self, i: int) -> None:
        """Drop node ``i`` and its edges; the nodes after it move up one place and keep their numbers."""
        if self.unread is not None:
            self.read_edges()
        count = len(self.handles)

        def moved(d: int) -> int:
            return d - 1 if d > i else d

        deps: list[int | tuple[int, ...]] = []
        for j, d in enumerate(self._deps):
            if j == i:
                continue
            if type(d) is int:
                deps.append(() if d == i else moved(d))
            else:
                kept = tuple(moved(k) for k in d if k != i)  # type: ignore[union-attr]
                deps.append(kept[0] if len(kept) == 1 else kept)
        numbers = [self.number(j) for j in range(count) if j != i]
        self.renamed = {j: number for j, number in enumerate(numbers) if number != j}
        self.allocs = {moved(j): a for j, a in self.allocs.items() if j != i}
        self.children = {moved(j): c for j, c in self.children.items() if j != i}
        self._shape, self._nested, self._recorded = None, (0, []), (0, [])
        del self.records[i]
        self._deps = deps
        # Last: a removal an interrupt cut short leaves the graph to be read again (Graph._begin_change).
        del self.handles[i]
        self._position = None

    def set_record(self, i: int, record: Any) -> None:
        """Node ``i`` takes the parameter record ``record`` (of its kind: a setter of the graph)."""
        self.records[i] = record
        self._recorded = (0, [])  # (an event-record node's event may have changed)

    def add_edge(self, source: int, target: int) -> None:
        """Note that node ``target`` waits for node ``source``."""
        self._set_deps(target, (*self.deps_of(target), source))

    def remove_edge(self, source: int, target: int) -> None:
        """Note that node ``target`` no longer waits for node ``source``."""
        kept = list(self.deps_of(target))
        kept.remove(source)
        self._set_deps(target, tuple(kept))

    def reaches(self, source: int, targets: Iterable[int]) -> bool:
        """Whether any of ``targets`` is ``source`` or depends on it, directly or not."""
        deps_of = self.deps_of
        pending, seen = list(targets), set()
        while pending:
            i = pending.pop()
            if i == source:
                return True
            if i not in seen:
                seen.add(i)
                pending.extend(deps_of(i))
        return False

    def shape(self) -> tuple[int | tuple[int, ...], ...]:
        """Each node's dependencies: the position of its one dependency, else their sorted positions. Two
        graphs pair node for node in creation order exactly when their shapes are equal."""
        if self._shape is None:
            if self.unread is not None:
                self.read_edges()
            self._shape = tuple(d if type(d) is int or len(d) < 2 else tuple(sorted(d))  # type: ignore[arg-type]
                                for d in self._deps)
        return self._shape

    def has_shape(self, shape: tuple[int | tuple[int, ...], ...]) -> bool:
        """Whether ``shape()`` equals ``shape``. Edges still unread are compared where they are (the backend's
        ``graph_has_shape``, which makes no Python object per node) rather than read into dependencies, when the
        backend can: an update compares a recaptured graph's shape with its executable graph's and, when they
        are equal, never needs the new graph's edges."""
        if self.unread is not None and len(shape) == len(self.handles):
            backend, graph = self.unread
            answer = backend.graph_has_shape(graph, len(self.handles), shape)
            if answer is not None:
                return answer
        return self.shape() == shape

    def nested(self) -> list[int]:
        """The positions of the child-graph nodes, in creation order. Records are only appended, so each is
        looked at once, here, rather than at every ``add`` (``read`` notes those it reads in its own pass:
        keep the two tests alike)."""
        seen, nested = self._nested
        records = self.records
        if seen < len(records):
            nested = nested + [i for i in range(seen, len(records)) if records[i].kind is NodeKind.GRAPH]
            self._nested = (len(records), nested)
        return nested

    def recorded_events(self) -> list[Any]:
        """The events of the event-record nodes (not of child graphs), in creation order; looked for as
        ``nested`` looks (each record once)."""
        seen, events = self._recorded
        records = self.records
        if seen < len(records):
            events = events + [records[i].event for i in range(seen, len(records))
                               if records[i].kind is NodeKind.EVENT_RECORD]
            self._recorded = (len(records), events)
        return events

    @classmethod
    def read(cls, backend: Backend, graph: Handle, known: Topology) -> Topology:
        """The backend graph ``graph`` as it is now: one listing of its nodes now, one of its edges when they
        are first needed. Nodes ``known`` holds keep their records and numbers; the backend is asked for the
        others' records, and they are numbered on from ``known``'s numbers."""
        topology = cls()
        number = known.numbered
        handles = topology.handles = backend.graph_nodes(graph)
        topology._position = None
        records, renamed = topology.records, topology.renamed
        position = known.position if known.handles else {}
        nested: list[int] = []
        events: list[Any] = []
        kernel = NodeKind.KERNEL
        for i, handle in enumerate(handles):
            j = position.get(handle)
            if j is None:
                name, number = number, number + 1
            else:
                name = known.number(j)
            if name != i:
                renamed[i] = name
            if j is None:
                record = backend.node_params(graph, handle)
            else:
                record = known.records[j]
                if j in known.allocs:
                    topology.allocs[i] = known.allocs[j]
                if j in known.children:
                    topology.children[i] = known.children[j]
            records.append(record)
            kind = record.kind
            if kind is kernel:  # (the common kind: nothing more to note)
                continue
            if kind in MEMORY_KINDS:
                topology.memory = True
                if j is None:
                    alloc = backend.node_allocation(graph, handle)
                    if alloc is not None:
                        topology.allocs[i] = alloc
            elif kind is NodeKind.GRAPH:
                nested.append(i)
            elif kind is NodeKind.EVENT_RECORD:
                events.append(record.event)
        # (What nested() and recorded_events() look for, noted in the one pass over the records.)
        topology._nested = (len(records), nested)
        topology._recorded = (len(records), events)
        topology._deps = [()] * len(handles)
        topology.unread = (backend, graph)
        topology.numbered = number
        return topology

    @classmethod
    def copy_of(cls, source: Topology, backend: Backend, graph: Handle) -> Topology:
        """The Topology of the backend graph ``graph``, a copy the backend made of the graph ``source`` describes
        (a child-graph node's): one listing of its nodes, paired with ``source``'s in creation order, which a
        copy keeps; records are ``source``'s but for child-graph nodes, whose copies the backend names."""
        handles = backend.graph_nodes(graph)
        if len(handles) != len(source.handles):  # (never seen: read it as any other)
            return cls.read(backend, graph, cls())
        topology = cls()
        topology.handles, topology._position, topology.numbered = handles, None, len(handles)
        topology.records = [backend.node_params(graph, h) if record.kind is NodeKind.GRAPH else record
                            for h, record in zip(handles, source.records)]
        if source.unread is not None:
            source.read_edges()
        topology._deps = list(source._deps)
        for i, child in source.children.items():  # nested copies, described the same way
            topology.children[i] = cls.copy_of(child, backend, topology.records[i].graph)
        return topology

    def _dependencies(self, edges: list[tuple[Any, Any]]) -> tuple[list[int | tuple[int, ...]], bool]:
        """Each listed node's dependencies from the backend's ``edges`` (source, target), in the edges' order: the
        position of its one dependency, else a tuple of positions (none, or several); and whether any node has
        several. Edges from or to a node not listed are left out (the comment below says why)."""
        deps: list[int | tuple[int, ...]] = [()] * len(self.handles)
        at = self.position.get
        several: dict[int, list[int]] = {}  # nodes with several dependencies: gathered, made tuples at the end
        for source, target in edges:
            i, j = at(target), at(source)
            # A node the backend added after the nodes were read (a capture records into the graph, or the
            # one being added now) is not here: the graph is read again, or ``add`` notes it with its deps.
            if i is None or j is None:
                continue
            d = deps[i]
            if d == ():
                deps[i] = j
            elif i in several:
                several[i].append(j)
            else:
                several[i] = [d, j]  # type: ignore[list-item]  # (d is the one dependency noted: an int)
        for i, listed in several.items():
            deps[i] = tuple(listed)
        return deps, bool(several)

    def read_edges(self) -> None:
        """Read the edges ``read`` left to read, if any."""
        if self.unread is None:
            return
        backend, graph = self.unread
        read = backend.graph_dependencies(graph, self.handles)  # (the compiled lane of _dependencies, or None)
        if read is not None:
            deps, several = read
        else:
            deps, several = self._dependencies(backend.graph_edges(graph))
        self._deps = deps
        if not several:  # (then the shape is the dependencies themselves: nothing to sort)
            self._shape = tuple(deps)
        self.unread = None  # last: an interrupted read is made again
