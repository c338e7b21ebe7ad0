"""Finding missing edges: pairs of a graph's nodes that touch the same memory, at least one writing, with no edge
ordering them (``Graph.hazards``, ``Graph.instantiate(check_hazards=True)``, ``$GPUGRAPH_CHECK_HAZARDS``).

What it holds: the ``Hazard`` record; what each node kind reads and writes (``_accesses``: a kernel's pointer
arguments by their ``const``, copies' and memsets' exact rows, host nodes' arrays or declared ``reads``/``writes``,
memory operations); the order the graph's edges give, child graphs and conditional bodies included (a node inside one
is ordered as its embedding node is; one conditional node's bodies never run together), as a bitset (a Python int)
per node, made in one pass over the nodes in topological order and one against it; a sweep over the accesses by
address that compares only those that overlap, with a few bitset operations each; the allocations' lifetimes; and
where each node was added, noted while ``$GPUGRAPH_CHECK_HAZARDS`` is on.
"""

from __future__ import annotations

import bisect
import heapq
import inspect
import operator
import os
import re
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ._errors import HazardError
from ._kernel import Kernel
from ._memory import Array
from ._nodes import (
    AllocParams,
    FreeParams,
    HostParams,
    KernelParams,
    MemcpyParams,
    MemOpsParams,
    MemsetParams,
    NodeKind,
    WaitValue,
)
from ._params import Param, resolve
from ._scalars import describe


class _Node(Protocol):
    """What the check reads of a node (a gpugraph Node; by this protocol the check stays below the graph modules)."""

    @property
    def kind(self) -> NodeKind: ...

    @property
    def params(self) -> Any: ...

    @property
    def bodies(self) -> tuple[_Graph, ...]: ...


class _Graph(Protocol):
    """What the check reads of a graph (a Graph, or the graph of a child-graph node or a body)."""

    @property
    def nodes(self) -> tuple[_Node, ...]: ...

    @property
    def edges(self) -> tuple[tuple[_Node, _Node], ...]: ...


ENV_VAR = "GPUGRAPH_CHECK_HAZARDS"
_SETTING = os.environ.get(ENV_VAR, "")  # (read once, when gpugraph is imported)
# Whether every instantiate checks, and every node added notes where: the environment's "1".
CHECKING = _SETTING == "1"

WRITE_WRITE, READ_WRITE, LIFETIME = "write/write", "read/write", "outside an allocation's lifetime"
# A copy's or memset's box of more rows than this counts as the byte range covering it (exact rows cost a sweep
# entry each).
MAX_ROWS = 4096

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_EXAMPLES = _PACKAGE + "examples" + os.sep  # (user programs: their lines are where nodes are added)
# Node -> (file, line) where it was added, noted while CHECKING (a node gone leaves by itself).
_where: weakref.WeakKeyDictionary[_Node, tuple[str, int]] = weakref.WeakKeyDictionary()


def at_instantiate(graph: _Graph, asked: object) -> None:
    """``Graph.instantiate``'s check: where ``asked`` (its ``check_hazards``) or ``$GPUGRAPH_CHECK_HAZARDS`` turns it
    on, HazardError for a graph with hazards; TypeError for an ``asked`` that is no bool, ValueError for a setting
    other than 1, 0 or none."""
    if type(asked) is not bool:
        raise TypeError(f"instantiate(check_hazards): expected True or False, got {describe(asked)}")
    if _SETTING not in ("", "0", "1"):
        raise ValueError(f"instantiate: ${ENV_VAR} is {_SETTING!r}; set it to 1 to check every instantiate for "
                         f"missing edges, or to 0 (or leave it unset) not to")
    if asked or CHECKING:
        check(graph, "instantiate")


def note_where(node: _Node) -> None:
    """Note the user's line that added ``node`` (the first frame outside gpugraph, its examples aside)."""
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PACKAGE) or name.startswith(_EXAMPLES):
            _where[node] = (name, frame.f_lineno)
            return
        frame = frame.f_back


def _added_at(node: _Node) -> str | None:
    at = _where.get(node)
    return None if at is None else f"{at[0]}:{at[1]}"


def declared(value: object, what: str) -> tuple:
    """The memory a host node declares it reads or writes (``what``: the argument, for errors): one Array or NumPy
    array, or an iterable of them."""
    if type(value) is Array or isinstance(value, np.ndarray):
        return (value,)
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{what}: expected Arrays or NumPy arrays (one, or a list of them), got {describe(value)}")
    arrays = tuple(value)
    for array in arrays:
        if type(array) is not Array and not isinstance(array, np.ndarray):
            raise TypeError(f"{what}: expected Arrays or NumPy arrays, got {describe(array)} among them")
    return arrays


@dataclass(frozen=True)
class Hazard:
    """Two nodes of a graph that touch the same memory, at least one writing, that no edge orders; or a node that
    touches graph memory outside its allocation's lifetime. ``str(hazard)`` says it in a sentence, with the fix.

    Attributes:
        kind: "write/write", "read/write", or "outside an allocation's lifetime".
        nodes: The two nodes (each of the graph, or of a child graph or conditional body in it), in the order the fix
            runs them: for a lifetime, the allocation node then the node touching its memory, or that node then the
            free.
        accesses: What each node does to the memory: "read", "write", "allocate" or "free".
        array: The memory, as the first of ``nodes`` that touches it names it (the other's for an allocation or free
            node): an Array, a NumPy array, or an address (int) where another library's node gives no Array.
        byte_range: (start, stop): the bytes of ``array`` both touch, as offsets from its start.
        edge: Two nodes of one graph: ``edge[0].graph.add_dependency(*edge)`` orders the pair (the nodes themselves,
            or the nodes embedding them in the graph that holds both).
        where: Where each of ``nodes`` was added (``"file:line"``), or None where not noted (lines are noted while
            ``$GPUGRAPH_CHECK_HAZARDS=1``, and never for what a stream capture records).
        inside: For each of ``nodes``, the nodes embedding its graph (child-graph and conditional nodes), innermost
            first; () for a node of the graph checked.
        backwards: For a lifetime, whether the graph orders the two the wrong way round (the node touching the memory
            before the allocation, or after the free): the fix's edge replaces that order.
    """

    kind: str
    nodes: tuple[_Node, _Node]
    accesses: tuple[str, str]
    array: object
    byte_range: tuple[int, int]
    edge: tuple[_Node, _Node]
    where: tuple[str | None, str | None]
    inside: tuple[tuple[_Node, ...], tuple[_Node, ...]] = ((), ())
    backwards: bool = False

    def __str__(self) -> str:
        first, second = (self._name(node, inside) + (f" (added at {at})" if at is not None else "")
                         for node, inside, at in zip(self.nodes, self.inside, self.where))
        memory = f"bytes {self.byte_range[0]} to {self.byte_range[1]} of {_memory_name(self.array)}"
        fix = f"add an edge from {self._edge_name(0)} to {self._edge_name(1)}"
        accesses = self.accesses
        if self.kind != LIFETIME:
            return (f"{first} {accesses[0]}s and {second} {accesses[1]}s {memory} with no edge ordering them "
                    f"({self.kind}): {fix}")
        if self.backwards:
            fix = f"it must run the other way round: {fix} in place of the path that orders them now"
        if accesses[0] == "allocate":
            order = "runs before" if self.backwards else "is not ordered after"
            return (f"{second} {accesses[1]}s {memory} outside its allocation's lifetime: it {order} {first}, which "
                    f"allocates it; {fix}")
        order = "runs after" if self.backwards else "is not ordered before"
        return (f"{first} {accesses[0]}s {memory} outside its allocation's lifetime: it {order} {second}, which "
                f"frees it; {fix}")

    @staticmethod
    def _name(node: _Node, inside: tuple[_Node, ...]) -> str:
        return repr(node) + "".join(f" inside {owner!r}" for owner in inside)

    def _edge_name(self, k: int) -> str:
        """The fix's node ``k``: one of ``nodes``, or of the nodes embedding one."""
        node, inside = self.edge[k], self.inside[k]
        return self._name(node, inside[inside.index(node) + 1:] if node in inside else inside)


def _memory_name(array: object) -> str:
    if isinstance(array, np.ndarray):
        return f"the NumPy array of shape {array.shape}, dtype {array.dtype}"
    if isinstance(array, int):
        return f"the memory at {array:#x}"
    return repr(array)


# What a node touches: (start address, stop address, whether it writes, the memory as named, its start address).
_Access = tuple[int, int, bool, object, int]


def _whole(array: object, write: bool, out: list[_Access]) -> None:
    """All of an Array, or of a NumPy array of any strides (from its lowest byte to its highest); nothing else."""
    if type(array) is Array:
        if array.nbytes:
            out.append((array.ptr, array.ptr + array.nbytes, write, array, array.ptr))
    elif isinstance(array, np.ndarray) and array.size:
        start = low = high = array.__array_interface__["data"][0]
        for n, stride in zip(array.shape, array.strides):
            low, high = (low + stride * (n - 1), high) if stride < 0 else (low, high + stride * (n - 1))
        out.append((low, high + array.itemsize, write, array, start))


def _rows(array: object, base: int, first: int, width: int, pitch: int, count: int, write: bool,
          out: list[_Access]) -> None:
    """``count`` rows of ``width`` bytes, ``pitch`` bytes apart, from ``first`` bytes into memory at ``base``: one entry
    per run of adjacent rows, or one covering them all past ``MAX_ROWS`` rows."""
    if width <= 0 or count <= 0:
        return
    start = base + first
    if width == pitch or count == 1 or count > MAX_ROWS:
        out.append((start, start + (count - 1) * pitch + width, write, array, base))
        return
    for row in range(count):
        out.append((start + row * pitch, start + row * pitch + width, write, array, base))


def _box(array: object, at: tuple[int, int, int], pitch: int, rows: int, extent: tuple[int, int, int], write: bool,
         out: list[_Access]) -> None:
    """What a 2-D or 3-D copy touches of one operand: ``extent`` (bytes, rows, slices) at ``at`` (x bytes, y, z) of
    memory in rows of ``pitch`` bytes, ``rows`` rows a slice."""
    base = _start(array)
    if base is None:
        return
    width, height, depth = extent
    first = at[2] * rows * pitch + at[1] * pitch + at[0]
    if depth == 1 or (width == pitch and height == rows):  # (one slice, or whole slices: its rows a pitch apart)
        _rows(array, base, first, width, pitch, height * depth, write, out)
    elif height * depth > MAX_ROWS:
        out.append((base + first, base + first + (depth - 1) * rows * pitch + (height - 1) * pitch + width, write,
                    array, base))
    else:
        for slice_ in range(depth):
            _rows(array, base, first + slice_ * rows * pitch, width, pitch, height, write, out)


def _start(array: object) -> int | None:
    if type(array) is Array:
        return array.ptr
    if isinstance(array, np.ndarray):
        return int(array.__array_interface__["data"][0])
    if isinstance(array, int):
        return array
    return None


def _accesses(record: object, signatures: dict[int, tuple[bool, ...] | None]) -> list[_Access]:
    """What the node of ``record`` reads and writes (``signatures``: each kernel's parameters that write, by id)."""
    out: list[_Access] = []
    if type(record) is KernelParams:
        _kernel_accesses(record, signatures, out)
    elif type(record) is MemcpyParams:
        box = record.box
        if box is None:
            for array, write in ((record.dst, True), (record.src, False)):
                base = _start(array)
                if base is not None:
                    _rows(array, base, 0, record.nbytes, record.nbytes, 1, write, out)
        else:
            _box(record.dst, box.dst_at, box.dst_pitch, box.dst_rows, box.extent, True, out)
            _box(record.src, box.src_at, box.src_pitch, box.src_rows, box.extent, False, out)
    elif type(record) is MemsetParams:
        base = _start(record.dst)
        if base is not None:
            width = record.count * record.element_size
            _rows(record.dst, base, record.offset, width, record.pitch or width, record.height, True, out)
    elif type(record) is HostParams:
        if record.reads is None and record.writes is None:  # undeclared: every array among its arguments
            for arg in record.args:
                _whole(resolve(arg), True, out)
        else:
            for array in record.reads or ():
                _whole(array, False, out)
            for array in record.writes or ():
                _whole(array, True, out)
    elif type(record) is MemOpsParams:
        for op in record.ops:
            target, size = op.target, op.target.dtype.itemsize
            _rows(target, target.ptr, op.index * size, size, size, 1, type(op) is not WaitValue, out)
    return out


def _kernel_accesses(record: KernelParams, signatures: dict[int, tuple[bool, ...] | None], out: list[_Access]) -> None:
    """A kernel node's Array arguments (a Param's current value): read where the parameter points at ``const``
    memory, else written (and written where the kernel's signature is unknown)."""
    kernel = record.kernel
    key = id(kernel)
    if key in signatures:
        writes = signatures[key]
    else:
        signature = kernel.signature if type(kernel) is Kernel else None  # (another library's: a raw handle)
        writes = signatures[key] = None if signature is None else tuple(not p.const for p in signature)
    for i, arg in enumerate(record.args):
        if type(arg) is Param:
            arg = arg.value
        if type(arg) is Array and arg.nbytes:
            start = arg.ptr
            out.append((start, start + arg.nbytes, writes is None or i >= len(writes) or writes[i], arg, start))


class _Flat:
    """The nodes of a graph and of the graphs its nodes embed, numbered in one order (each embedding node followed by
    what it embeds, so that a node and its contents are one run of numbers), with the order its edges give."""

    def __init__(self, graph: _Graph) -> None:
        self.nodes: list[_Node] = []
        self.parent: list[int] = []  # the number of the node embedding each one, -1 for the graph's own
        self.spans: list[int] = []  # per node, the bitset of its run (itself and what it embeds)
        # Per graph walked, parents first: its nodes' numbers, their dependencies (positions in it), and the runs of
        # the other bodies of the conditional node it is a body of (they never run with it).
        self.levels: list[tuple[list[int], list[tuple[int, ...]], int]] = []
        self._walk(graph, -1)
        self.ordered: list[int] = [0] * len(self.nodes)  # per node, the nodes ordered with it (itself included)
        self.above: list[int] = []  # per node of the graph itself, those ordered before it (itself included)
        self.below: list[int] = []  # ... and after it
        self._order()

    def _walk(self, graph: _Graph, parent: int) -> int:
        """Number ``graph``'s nodes and theirs; its level's index."""
        nodes = graph.nodes
        position = {node: i for i, node in enumerate(nodes)}
        deps: list[list[int]] = [[] for _ in nodes]
        for a, b in graph.edges:
            deps[position[b]].append(position[a])
        numbers: list[int] = []
        level = len(self.levels)
        self.levels.append((numbers, [tuple(d) for d in deps], 0))
        for node in nodes:
            g = len(self.nodes)
            numbers.append(g)
            self.nodes.append(node)
            self.parent.append(parent)
            self.spans.append(0)
            if node.kind is NodeKind.GRAPH:
                self._walk(node.params.graph, g)
            elif node.kind is NodeKind.CONDITIONAL:
                runs = []
                for body in node.bodies:
                    first = len(self.nodes)
                    runs.append((self._walk(body, g), ((1 << (len(self.nodes) - first)) - 1) << first))
                every = 0
                for _, run in runs:
                    every |= run
                for body_level, run in runs:  # (one body runs at a time: each is apart from the others)
                    numbers_, deps_, _ = self.levels[body_level]
                    self.levels[body_level] = (numbers_, deps_, every & ~run)
            self.spans[g] = ((1 << (len(self.nodes) - g)) - 1) << g
        return level

    def _order(self) -> None:
        """Each node's bitset of the nodes ordered with it, level by level from the graph itself down: those before
        and after it in its graph, and those ordered with the node embedding its graph (or in another body)."""
        for numbers, deps, apart in self.levels:
            above, below = _reach(numbers, deps, self.spans)
            parent = self.parent[numbers[0]] if numbers else -1
            # (What the embedding node is ordered with, but for its own run: its graph's nodes are ordered here.)
            context = (self.ordered[parent] & ~self.spans[parent]) | apart if parent >= 0 else 0
            for i, g in enumerate(numbers):
                self.ordered[g] = context | above[i] | below[i]
            if parent < 0:
                self.above = [0] * len(self.nodes)
                self.below = [0] * len(self.nodes)
                for i, g in enumerate(numbers):
                    self.above[g], self.below[g] = above[i], below[i]

    def top(self, g: int) -> int:
        """The node of the graph itself that is ``g`` or embeds it."""
        while self.parent[g] >= 0:
            g = self.parent[g]
        return g

    def edge(self, x: int, y: int) -> tuple[int, int]:
        """The nodes of one graph whose edge would order ``x`` and ``y`` (themselves, or what embeds them), the one made
        first first."""
        chain = {}  # the embedding node -> the node of its graph that is x or embeds x
        while x >= 0:
            chain[self.parent[x]] = x
            x = self.parent[x]
        while self.parent[y] not in chain:
            y = self.parent[y]
        x = chain[self.parent[y]]
        return (x, y) if x < y else (y, x)

    def inside(self, g: int) -> tuple[_Node, ...]:
        """The nodes embedding node ``g``'s graph, innermost first."""
        chain = []
        parent = self.parent[g]
        while parent >= 0:
            chain.append(self.nodes[parent])
            parent = self.parent[parent]
        return tuple(chain)

    def hazard(self, kind: str, pair: tuple[int, int], accesses: tuple[str, str], array: object,
               byte_range: tuple[int, int], edge: tuple[int, int], backwards: bool = False) -> Hazard:
        """The Hazard of the nodes ``pair`` (``backwards``: the graph orders them the other way round)."""
        nodes = (self.nodes[pair[0]], self.nodes[pair[1]])
        return Hazard(kind, nodes, accesses, array, byte_range, (self.nodes[edge[0]], self.nodes[edge[1]]),
                      (_added_at(nodes[0]), _added_at(nodes[1])), (self.inside(pair[0]), self.inside(pair[1])),
                      backwards)


def _reach(numbers: list[int], deps: list[tuple[int, ...]], spans: list[int]) -> tuple[list[int], list[int]]:
    """For the nodes of one graph (``numbers``, with ``deps`` as positions), the runs of the nodes before each and
    after each, each included, as bitsets: one pass in topological order and one against it."""
    n = len(numbers)
    dependents: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            dependents[j].append(i)
    order = [i for i in range(n) if not waiting[i]]
    for i in order:  # (Kahn's: the list grows as nodes become ready; the edges are acyclic, checked when added)
        for j in dependents[i]:
            waiting[j] -= 1
            if not waiting[j]:
                order.append(j)
    above = [0] * n
    for i in order:
        mask = spans[numbers[i]]
        for j in deps[i]:
            mask |= above[j]
        above[i] = mask
    below = [0] * n
    for i in reversed(order):
        mask = spans[numbers[i]]
        for j in dependents[i]:
            mask |= below[j]
        below[i] = mask
    return above, below


# An access as the sweep keeps it: (start, stop, whether it writes, the memory as named, its start, the node's number).
_Entry = tuple[int, int, bool, object, int, int]
# Hazards found, by pair of node numbers: (rank: 1 read/write, 2 write/write, 3 lifetime; the hazard).
_Found = dict[tuple[int, int], tuple[int, Hazard]]


def find_hazards(graph: _Graph) -> list[Hazard]:
    """Every pair of ``graph``'s nodes (its child graphs' and bodies' included) that touch the same memory, at least
    one writing, with no edge ordering them, and every access to graph memory outside its allocation's lifetime; in
    the order of the nodes (each embedding node followed by what it embeds)."""
    flat = _Flat(graph)
    signatures: dict[int, tuple[bool, ...] | None] = {}
    accesses: list[_Entry] = []
    allocations: list[tuple[int, int, int]] = []  # (start, stop, node) of each allocation node
    frees: list[tuple[int, int]] = []  # (address, node) of each free node
    for g, node in enumerate(flat.nodes):
        record = node.params
        if type(record) is AllocParams:
            allocations.append((record.ptr, record.ptr + record.nbytes, g))
        elif type(record) is FreeParams:
            frees.append((record.ptr, g))
        else:
            accesses.extend((*access, g) for access in _accesses(record, signatures))
    found: _Found = {}
    _sweep(flat, accesses, found)
    if allocations:
        _lifetimes(flat, accesses, allocations, frees, found)
    return [hazard for _, (_, hazard) in sorted(found.items())]


def _sweep(flat: _Flat, accesses: list[_Entry], found: _Found) -> None:
    """Compare each access, in order of address, with those still open at its start whose nodes are not ordered with
    its node: bitsets of the nodes with open writes and with any open access find them."""
    accesses.sort(key=operator.itemgetter(0))  # (by start: the order of accesses starting together does not matter)
    open_: list[tuple[int, int]] = []  # heap of (stop, index) of the accesses open
    by_node: dict[int, list[int]] = {}  # node -> the indices of its open accesses
    counts: dict[int, list[int]] = {}  # node -> [its open writes, its open accesses]
    writers = touchers = 0  # bitsets of the nodes with open writes, and with any open access
    spans = flat.spans  # (an accessing node embeds nothing: its span is its bit)
    for index, (start, stop, write, _memory, _base, g) in enumerate(accesses):
        while open_ and open_[0][0] <= start:
            done = heapq.heappop(open_)[1]
            h = accesses[done][5]
            by_node[h].remove(done)
            count = counts[h]
            count[1] -= 1
            if not count[1]:
                touchers ^= spans[h]
            if accesses[done][2]:
                count[0] -= 1
                if not count[0]:
                    writers ^= spans[h]
        open_nodes = touchers if write else writers
        ordered = open_nodes & flat.ordered[g]
        if ordered != open_nodes:  # (one operation on bitsets where every node open is ordered with g)
            for h in _members(open_nodes ^ ordered):
                for other in by_node[h]:
                    if write or accesses[other][2]:
                        _note_race(flat, accesses[other], accesses[index], found)
        count = counts.setdefault(g, [0, 0])
        if not count[1]:
            touchers |= spans[g]
        count[1] += 1
        if write:
            if not count[0]:
                writers |= spans[g]
            count[0] += 1
        by_node.setdefault(g, []).append(index)
        heapq.heappush(open_, (stop, index))


def _members(mask: int) -> list[int]:
    """The numbers of the bits set in ``mask``."""
    return [match.start() for match in re.finditer("1", f"{mask:b}"[::-1])]


def _note_race(flat: _Flat, one: _Entry, other: _Entry, found: _Found) -> None:
    """Note the overlap of the accesses ``one`` and ``other`` of two nodes not ordered: one hazard per pair of nodes,
    write/write where any of their overlaps is one, else the first overlap found (the lowest address)."""
    first, second = (one, other) if one[5] < other[5] else (other, one)
    key = (first[5], second[5])
    rank = 2 if first[2] and second[2] else 1
    if key in found and found[key][0] >= rank:
        return
    start, stop = max(first[0], second[0]), min(first[1], second[1])
    found[key] = (rank, flat.hazard(WRITE_WRITE if rank == 2 else READ_WRITE, key,
                                    ("write" if first[2] else "read", "write" if second[2] else "read"), first[3],
                                    (start - first[4], stop - first[4]), flat.edge(*key)))


def _lifetimes(flat: _Flat, accesses: list[_Entry], allocations: list[tuple[int, int, int]],
               frees: list[tuple[int, int]], found: _Found) -> None:
    """Each access to memory that an allocation node of the graph allocates must be ordered after that node and,
    where the graph frees it, before the free: within the lifetime of one of the allocations at its address (the
    graph may give an allocation ordered after a free the freed memory's address)."""
    at: dict[int, list[int]] = {}  # address -> its allocation nodes
    for start, _stop, a in allocations:
        at.setdefault(start, []).append(a)
    freed: dict[int, int] = {}  # allocation node -> its free node
    for address, free in frees:
        last = None  # the free frees the last allocation at its address ordered before it (they follow each other)
        for a in at.get(address, ()):
            if flat.above[free] >> a & 1 and (last is None or flat.above[a] >> last & 1):
                last = a
        if last is not None:
            freed[last] = free
    allocations.sort()
    addresses = [start for start, _, _ in allocations]
    longest = max(stop - start for start, stop, _ in allocations)
    for access in accesses:
        start, stop, g = access[0], access[1], access[5]
        t = flat.top(g)
        outside = None  # (allocation, whether the access is ordered after it)
        i = bisect.bisect_left(addresses, stop)
        while i > 0 and addresses[i - 1] > start - longest:
            i -= 1
            a_start, a_stop, a = allocations[i]
            if not (a_start < stop and start < a_stop):
                continue
            after = bool(flat.above[t] >> a & 1)
            f = freed.get(a)
            if after and (f is None or flat.below[t] >> f & 1):
                break  # within this allocation's lifetime
            # (Named in the message: one it is ordered after, the last of those, else any.)
            if outside is None or (after and (not outside[1] or flat.above[a] >> outside[0][2] & 1)):
                outside = (allocations[i], after)
        else:
            if outside is not None:
                _note_lifetime(flat, access, outside[0], outside[1], freed.get(outside[0][2]), found)


def _note_lifetime(flat: _Flat, access: _Entry, allocation: tuple[int, int, int], after: bool, free: int | None,
                   found: _Found) -> None:
    """Note the access outside the lifetime of ``allocation``: not ordered after its node (unless ``after``), or not
    before its ``free``, or both (two hazards)."""
    start, stop, write, memory, base, g = access
    a_start, a_stop, a = allocation
    t = flat.top(g)
    verb = "write" if write else "read"
    byte_range = (max(start, a_start) - base, min(stop, a_stop) - base)
    if not after and (a, g) not in found:
        found[a, g] = (3, flat.hazard(LIFETIME, (a, g), ("allocate", verb), memory, byte_range, (a, t),
                                      bool(flat.above[a] >> t & 1)))
    if free is not None and not flat.below[t] >> free & 1 and (g, free) not in found:
        found[g, free] = (3, flat.hazard(LIFETIME, (g, free), (verb, "free"), memory, byte_range, (t, free),
                                         bool(flat.above[t] >> free & 1)))


def check(graph: _Graph, what: str) -> None:
    """Raise HazardError naming the first of ``graph``'s hazards and how many more there are (``what``: the call)."""
    hazards = find_hazards(graph)
    if not hazards:
        return
    more = len(hazards) - 1
    tail = f"; and {more} more hazard{'s' * (more != 1)} (graph.hazards() lists them)" if more else ""
    hint = "" if CHECKING else (f" (set {ENV_VAR}=1 before gpugraph is imported to have the lines that added the "
                                f"nodes)")
    raise HazardError(f"{what}: a missing edge: {hazards[0]}{tail}{hint}", hazards)
