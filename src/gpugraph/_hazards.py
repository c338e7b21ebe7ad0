"""Finding missing edges: pairs of a graph's nodes that touch the same memory, at least one writing, with no edge
ordering them (``Graph.hazards``, ``Graph.instantiate(check_hazards=True)``, ``$GPUGRAPH_CHECK_HAZARDS``).

What it holds: the ``Hazard`` record; what each node kind reads and writes (``_accesses``: a kernel's pointer
arguments by their ``const``, copies' and memsets' exact rows, host nodes' arrays or declared ``reads``/``writes``,
memory operations); a sweep over the accesses by address that compares only those that overlap, asking
``_hazard_order`` (the order the graph's edges give, child graphs and conditional bodies included) whether their
nodes are ordered, and that sets aside an open access ordered before a later one that covers it (compared again only
where that one is not ordered); the allocations' lifetimes; and where each node was added, noted while
``$GPUGRAPH_CHECK_HAZARDS`` is on.
"""

from __future__ import annotations

import bisect
import heapq
import inspect
import operator
import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._errors import HazardError
from ._hazard_order import APART, BEFORE, CheckedGraph, CheckedNode, Flat
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
    WaitValue,
)
from ._params import Param, resolve
from ._scalars import describe

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
_where: weakref.WeakKeyDictionary[CheckedNode, tuple[str, int]] = weakref.WeakKeyDictionary()


def at_instantiate(graph: CheckedGraph, asked: object) -> None:
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


def note_where(node: CheckedNode, again: bool = True) -> None:
    """Note the user's line that added ``node`` (the first frame outside gpugraph, its examples aside); ``again``
    False: only where none is noted yet."""
    if not again and node in _where:
        return
    frame = inspect.currentframe()
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PACKAGE) or name.startswith(_EXAMPLES):
            _where[node] = (name, frame.f_lineno)
            return
        frame = frame.f_back


def _added_at(node: CheckedNode) -> str | None:
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
    nodes: tuple[CheckedNode, CheckedNode]
    accesses: tuple[str, str]
    array: object
    byte_range: tuple[int, int]
    edge: tuple[CheckedNode, CheckedNode]
    where: tuple[str | None, str | None]
    inside: tuple[tuple[CheckedNode, ...], tuple[CheckedNode, ...]] = ((), ())
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
    def _name(node: CheckedNode, inside: tuple[CheckedNode, ...]) -> str:
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


def _hazard(flat: Flat, kind: str, pair: tuple[int, int], accesses: tuple[str, str], array: object,
            byte_range: tuple[int, int], edge: tuple[int, int], backwards: bool = False) -> Hazard:
    """The Hazard of the nodes ``pair`` (``backwards``: the graph orders them the other way round)."""
    nodes = (flat.nodes[pair[0]], flat.nodes[pair[1]])
    return Hazard(kind, nodes, accesses, array, byte_range, (flat.nodes[edge[0]], flat.nodes[edge[1]]),
                  (_added_at(nodes[0]), _added_at(nodes[1])), (flat.inside(pair[0]), flat.inside(pair[1])), backwards)


# An access as the sweep keeps it: (start, stop, whether it writes, the memory as named, its start, the node's number).
_Entry = tuple[int, int, bool, object, int, int]
# Races found, by pair of node numbers: (rank: 1 read/write, 2 write/write; the later and the earlier of the two
# accesses in the sweep's order). Lifetimes found, by pair of node numbers: the hazard.
_Races = dict[tuple[int, int], tuple[int, int, int]]
_Found = dict[tuple[int, int], Hazard]


def find_hazards(graph: CheckedGraph) -> list[Hazard]:
    """Every pair of ``graph``'s nodes (its child graphs' and bodies' included) that touch the same memory, at least
    one writing, with no edge ordering them, and every access to graph memory outside its allocation's lifetime; in
    the order of the nodes (each embedding node followed by what it embeds)."""
    flat = Flat(graph)
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
    races: _Races = {}
    _sweep(flat, accesses, races)
    found: _Found = {key: _race(flat, accesses[later], accesses[earlier], rank)
                     for key, (rank, later, earlier) in races.items()}
    if allocations:
        _lifetimes(flat, accesses, allocations, frees, found)
    return [hazard for _, hazard in sorted(found.items(), key=operator.itemgetter(0))]


def _sweep(flat: Flat, accesses: list[_Entry], races: _Races) -> None:
    """Compare each access, in order of address, with those still open at its start whose nodes are not ordered with
    its node (``_Open``)."""
    accesses.sort(key=operator.itemgetter(0))  # (by start: the order of accesses starting together does not matter)
    open_ = _Open(flat, accesses, races)
    for index in range(len(accesses)):
        open_.compare(index)


class _Open:
    """The accesses open at the sweep's address, compared with the next. Those ordered before it go into a group (two
    or more: accesses and groups), compared as one with those that follow: where the group's anchor, a vertex that
    each of them reaches, is ordered before the later access, so is each of them; else each is compared (and each
    group in it likewise)."""

    def __init__(self, flat: Flat, accesses: list[_Entry], races: _Races) -> None:
        self.flat, self.accesses, self.races = flat, accesses, races
        # Per entry (the accesses, then the groups): when it ends, whether it writes (a group: one of it does), and
        # its node's vertex (a group: its anchor).
        self.ends = [access[1] for access in accesses]
        self.writes = [access[2] for access in accesses]
        self.vertices = [flat.vertex(access[5]) for access in accesses]
        self.heap: list[tuple[int, int]] = []  # (end, entry) of the entries open
        self.tops: tuple[dict[int, None], dict[int, None]] = ({}, {})  # the open reads and writes in no group
        self.groups: dict[int, list[int]] = {}  # group -> what is in it

    def compare(self, index: int) -> None:
        """Compare access ``index`` with those open at its start, then open it."""
        ends, writes, vertices, tops, relation = self.ends, self.writes, self.vertices, self.tops, self.flat.relation
        start, vertex, write = self.accesses[index][0], vertices[index], writes[index]
        while self.heap and self.heap[0][0] <= start:
            done = heapq.heappop(self.heap)[1]
            tops[writes[done]].pop(done, None)  # (unless in a group)
            self.groups.pop(done, None)  # (what is in it has ended too)
        before: list[int] = []
        pending = [*tops[True], *tops[False]] if write else [*tops[True]]  # (two reads are no hazard)
        while pending:
            other = pending.pop()
            if ends[other] <= start or not (write or writes[other]):  # (in a group: ended, or two reads)
                continue
            order = relation(vertices[other], vertex)
            if order == BEFORE:
                if other in tops[writes[other]]:
                    before.append(other)
                continue
            if order == APART and other < len(self.accesses):
                _note_race(self.races, self.accesses, other, index)
            pending.extend(self.groups.get(other, ()))
        if len(before) > 1:
            self._group(before, vertex)
        tops[write][index] = None
        heapq.heappush(self.heap, (ends[index], index))

    def _group(self, before: list[int], vertex: int) -> None:
        """Put the open entries ``before``, in no group, into one, anchored on the chain of ``vertex``."""
        ends, writes, vertices, tops = self.ends, self.writes, self.vertices, self.tops
        end, write, members = 0, False, []
        for other in before:
            del tops[writes[other]][other]
            end = max(end, ends[other])
            write = write or writes[other]
            members.append(vertices[other])
        group = len(ends)
        ends.append(end)
        writes.append(write)
        vertices.append(self.flat.anchor(members, vertex))
        self.groups[group] = before
        tops[write][group] = None
        heapq.heappush(self.heap, (end, group))


def _note_race(races: _Races, accesses: list[_Entry], earlier: int, later: int) -> None:
    """Note the overlap of the accesses ``earlier`` and ``later`` (in the sweep's order) of two nodes not ordered:
    one hazard per pair of nodes, write/write where any of their overlaps is one; of those of its kind, the one whose
    later access comes first in the sweep, and of those the one whose earlier does."""
    one, other = accesses[earlier], accesses[later]
    key = (one[5], other[5]) if one[5] < other[5] else (other[5], one[5])
    noted = (2 if one[2] and other[2] else 1, later, earlier)
    known = races.get(key)
    if known is None or noted[0] > known[0] or (noted[0] == known[0] and noted[1:] < known[1:]):
        races[key] = noted


def _race(flat: Flat, one: _Entry, other: _Entry, rank: int) -> Hazard:
    """The hazard of the overlap of the accesses ``one`` and ``other``."""
    first, second = (one, other) if one[5] < other[5] else (other, one)
    key = (first[5], second[5])
    start, stop = max(first[0], second[0]), min(first[1], second[1])
    return _hazard(flat, WRITE_WRITE if rank == 2 else READ_WRITE, key,
                   ("write" if first[2] else "read", "write" if second[2] else "read"), first[3],
                   (start - first[4], stop - first[4]), flat.edge(*key))


def _lifetimes(flat: Flat, accesses: list[_Entry], allocations: list[tuple[int, int, int]],
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
            if flat.path(a, free) and (last is None or flat.path(last, a)):
                last = a
        if last is not None:
            freed[last] = free
    allocations.sort()
    addresses = [start for start, _, _ in allocations]
    longest = max(stop - start for start, stop, _ in allocations)
    for access in accesses:
        start, stop, g = access[0], access[1], access[5]
        outside = None  # (allocation, whether the access is ordered after it)
        i = bisect.bisect_left(addresses, stop)
        while i > 0 and addresses[i - 1] > start - longest:
            i -= 1
            a_start, a_stop, a = allocations[i]
            if not (a_start < stop and start < a_stop):
                continue
            after = flat.path(a, g)
            f = freed.get(a)
            if after and (f is None or flat.path(g, f)):
                break  # within this allocation's lifetime
            # (Named in the message: one it is ordered after, the last of those, else any.)
            if outside is None or (after and (not outside[1] or flat.path(outside[0][2], a))):
                outside = (allocations[i], after)
        else:
            if outside is not None:
                _note_lifetime(flat, access, outside[0], outside[1], freed.get(outside[0][2]), found)


def _note_lifetime(flat: Flat, access: _Entry, allocation: tuple[int, int, int], after: bool, free: int | None,
                   found: _Found) -> None:
    """Note the access outside the lifetime of ``allocation``: not ordered after its node (unless ``after``), or not
    before its ``free``, or both (two hazards)."""
    start, stop, write, memory, base, g = access
    a_start, a_stop, a = allocation
    t = flat.top(g)
    verb = "write" if write else "read"
    byte_range = (max(start, a_start) - base, min(stop, a_stop) - base)
    if not after and (a, g) not in found:
        found[a, g] = _hazard(flat, LIFETIME, (a, g), ("allocate", verb), memory, byte_range, (a, t),
                              flat.path(g, a))
    if free is not None and not flat.path(g, free) and (g, free) not in found:
        found[g, free] = _hazard(flat, LIFETIME, (g, free), (verb, "free"), memory, byte_range, (t, free),
                                 flat.path(free, g))


def check(graph: CheckedGraph, what: str) -> None:
    """Raise HazardError naming the first of ``graph``'s hazards and how many more there are (``what``: the call)."""
    hazards = find_hazards(graph)
    if not hazards:
        return
    more = len(hazards) - 1
    tail = f"; and {more} more hazard{'s' * (more != 1)} (graph.hazards() lists them)" if more else ""
    hint = "" if CHECKING else (f" (set {ENV_VAR}=1 before gpugraph is imported to have the lines that added the "
                                f"nodes)")
    raise HazardError(f"{what}: a missing edge: {hazards[0]}{tail}{hint}", hazards)
