"""Node kinds and one frozen parameter record per kind: the vocabulary shared by the front end and backends.
Each record says what its node does in a line (``label``, for Graph.to_dot).

Fields hold front-end objects (Kernel, Array, Event, Graph, callables) for nodes gpugraph made. Nodes
recorded from other libraries on a GPU backend may carry raw addresses (int) where gpugraph has no object.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple


class NodeKind(enum.Enum):
    """What a graph node does (CUDA's CUgraphNodeType / HIP's hipGraphNodeType)."""

    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    HOST = "host"
    GRAPH = "graph"
    EMPTY = "empty"
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"
    MEM_ALLOC = "mem_alloc"
    MEM_FREE = "mem_free"
    CONDITIONAL = "conditional"
    SEMAPHORE_SIGNAL = "semaphore_signal"
    SEMAPHORE_WAIT = "semaphore_wait"
    MEM_OPS = "mem_ops"


class Removed:
    """The handle a Node holds once removed from its graph (``Graph.remove_node``): it names no node of any graph (a
    backend may give a later node the handle the removed one had)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<removed>"


def why_gone(handle: Any) -> str:
    """Why a Node whose handle is ``handle`` is no longer in its graph, for messages."""
    if type(handle) is Removed:
        return "it was removed with remove_node"
    return "the capture that added it was discarded"


# (A tuple: ``in`` finds a member by identity first, where a set would call Enum's Python-level __hash__; this
# one is tested for every node read from a backend.)
MEMORY_KINDS = (NodeKind.MEM_ALLOC, NodeKind.MEM_FREE)

# What an edge waits for (CUDA's edge data: its type and the source kernel's port). "full": the source node
# has finished. "programmatic": every block of the source kernel has called cudaTriggerProgrammaticLaunchCompletion
# or exited (the target's cudaGridDependencySynchronize waits for the rest). "launch_order": every block of the
# source kernel has started. The last two join kernel nodes only.
DEPENDENCY_KINDS = ("full", "programmatic", "launch_order")
SEMAPHORE_KINDS = (NodeKind.SEMAPHORE_SIGNAL, NodeKind.SEMAPHORE_WAIT)
# CUDA allows enabling and disabling only these kinds on an executable graph.
TOGGLEABLE_KINDS = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET})
# The kinds a conditional node's body may hold (CUDA refuses the others there: host, event and memory nodes).
BODY_KINDS = frozenset({NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.EMPTY, NodeKind.GRAPH,
                        NodeKind.CONDITIONAL})


class _KernelFields(NamedTuple):
    kernel: Any
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int
    args: tuple
    device: int  # the index of the device the kernel runs on, among its backend's


class KernelParams(_KernelFields):
    """A kernel launch: the kernel, its launch shape, its converted arguments and the device it runs on.

    A named tuple rather than a frozen dataclass like the other records: it is made at every captured
    launch and kernel node, and a tuple is made three times faster. The fields are on a base class
    because a NamedTuple's own body may hold only fields (``kind`` is a class attribute).
    """

    __slots__ = ()
    kind: ClassVar[NodeKind] = NodeKind.KERNEL

    def label(self) -> str:
        """What the node does, in a line (Graph.to_dot)."""
        return f"{getattr(self.kernel, 'name', self.kernel)}\\ngrid={self.grid} block={self.block}"


class Box(NamedTuple):
    """Where a 2-D or 3-D copy reads and writes (CUDA_MEMCPY3D): ``extent`` is (width in bytes, height in rows,
    depth in slices), placed at ``dst_at`` and ``src_at`` (x in bytes, y, z) of memory laid out in rows of
    ``dst_pitch``/``src_pitch`` bytes, ``dst_rows``/``src_rows`` rows a slice."""

    extent: tuple[int, int, int]
    dst_at: tuple[int, int, int]
    dst_pitch: int
    dst_rows: int
    src_at: tuple[int, int, int]
    src_pitch: int
    src_rows: int


@dataclass(frozen=True)
class MemcpyParams:
    """A copy of ``nbytes`` bytes from ``src`` to ``dst`` (Arrays or host NumPy arrays): from their starts, or
    (``box``) a 2-D or 3-D box of them, ``nbytes`` in all. ``pins`` hold its NumPy operands' memory page-locked for as
    long as the record lives (``gpugraph._memory.pin_host``); they are no part of what the copy is."""

    kind: ClassVar[NodeKind] = NodeKind.MEMCPY
    dst: Any
    src: Any
    nbytes: int
    box: Box | None = None
    pins: tuple = field(default=(), compare=False, repr=False)

    def label(self) -> str:
        if self.box is not None:
            return f"memcpy {'x'.join(map(str, self.box.extent))} B"
        return f"memcpy {self.nbytes} B"


@dataclass(frozen=True)
class MemsetParams:
    """Fill ``count`` elements of ``element_size`` bytes at ``dst`` with the bit pattern ``pattern``; a 2-D memset
    fills ``count`` elements in each of ``height`` rows, ``pitch`` bytes apart, from ``offset`` bytes into ``dst``.

    ``value`` is the user's value as given; ``pattern`` is its bit pattern at ``element_size`` bytes.
    """

    kind: ClassVar[NodeKind] = NodeKind.MEMSET
    dst: Any
    value: Any
    pattern: int
    element_size: int
    count: int
    pitch: int = 0
    height: int = 1
    offset: int = 0

    def label(self) -> str:
        rows = f"{self.height} rows of " if self.height > 1 else ""
        return f"memset {rows}{self.count}x{self.element_size} B = {self.value!r}"


@dataclass(frozen=True)
class HostParams:
    """A call of ``fn(*args)`` on the host, in graph order. ``reads`` and ``writes``: the memory (Arrays, NumPy arrays)
    the call reads and writes, where its maker declared them (``Graph.add_host(reads=, writes=)``), for
    ``Graph.hazards``; None where undeclared. No part of what the call does."""

    kind: ClassVar[NodeKind] = NodeKind.HOST
    fn: Callable[..., Any]
    args: tuple
    reads: tuple | None = field(default=None, compare=False)
    writes: tuple | None = field(default=None, compare=False)

    def label(self) -> str:
        return f"host {getattr(self.fn, '__qualname__', repr(self.fn))}"


@dataclass(frozen=True)
class EmptyParams:
    """A node that does nothing: a join point for dependencies."""

    kind: ClassVar[NodeKind] = NodeKind.EMPTY

    def label(self) -> str:
        return "empty"


@dataclass(frozen=True)
class ChildGraphParams:
    """A nested graph; the node owns a copy of the graph made when the node was added."""

    kind: ClassVar[NodeKind] = NodeKind.GRAPH
    graph: Any

    def label(self) -> str:
        return f"child graph ({len(self.graph)} nodes)"


@dataclass(frozen=True)
class EventRecordParams:
    """Record ``event`` when the node runs."""

    kind: ClassVar[NodeKind] = NodeKind.EVENT_RECORD
    event: Any

    def label(self) -> str:
        return "event record"


@dataclass(frozen=True)
class EventWaitParams:
    """Wait for the last record of ``event`` before dependents run."""

    kind: ClassVar[NodeKind] = NodeKind.EVENT_WAIT
    event: Any

    def label(self) -> str:
        return "event wait"


@dataclass(frozen=True)
class SemaphoreSignalParams:
    """Signal each of ``semaphores`` (ExternalSemaphores): a timeline semaphore to its value in ``values``, a
    binary one (its value 0) to signaled."""

    kind: ClassVar[NodeKind] = NodeKind.SEMAPHORE_SIGNAL
    semaphores: tuple
    values: tuple[int, ...]

    def label(self) -> str:
        return f"signal {len(self.semaphores)} semaphore{'s' if len(self.semaphores) != 1 else ''}"


@dataclass(frozen=True)
class SemaphoreWaitParams:
    """Wait until each of ``semaphores`` is signaled: a timeline semaphore to at least its value in ``values``, a
    binary one once (the wait takes its signal)."""

    kind: ClassVar[NodeKind] = NodeKind.SEMAPHORE_WAIT
    semaphores: tuple
    values: tuple[int, ...]

    def label(self) -> str:
        return f"wait for {len(self.semaphores)} semaphore{'s' if len(self.semaphores) != 1 else ''}"


@dataclass(frozen=True)
class WaitValue:
    """A memory operation (``Graph.add_mem_ops``, ``Stream.wait_value``): wait until element ``index`` of ``target``
    (an Array of 4- or 8-byte integers) meets ``condition`` against ``value``: "geq" (at least ``value``, compared
    cyclically as CUDA does: the difference as a signed integer is not negative), "eq", "and" (the bitwise AND is
    not 0) or "nor" (the bitwise NOR is not 0)."""

    target: Any
    value: int
    condition: str = "geq"
    index: int = 0


@dataclass(frozen=True)
class WriteValue:
    """A memory operation: write ``value`` to element ``index`` of ``target`` (an Array of 4- or 8-byte integers)."""

    target: Any
    value: int
    index: int = 0


@dataclass(frozen=True)
class MemOpsParams:
    """A batch of memory operations (``WaitValue``, ``WriteValue``), run in order (CUDA's batch memory-op node)."""

    kind: ClassVar[NodeKind] = NodeKind.MEM_OPS
    ops: tuple

    def label(self) -> str:
        return "mem ops: " + ", ".join("wait" if isinstance(op, WaitValue) else "write" for op in self.ops)


@dataclass(frozen=True)
class AllocParams:
    """Allocate ``nbytes`` of graph memory at the fixed address ``ptr``, on the device of index ``device`` (pinned
    device memory: its pool's location). ``access``: the indices of the other devices whose kernels may read and
    write it too (the allocation's access descriptors; a captured allocation takes those of its device's memory
    pool when it is captured)."""

    kind: ClassVar[NodeKind] = NodeKind.MEM_ALLOC
    nbytes: int
    ptr: int
    device: int
    access: tuple[int, ...] = ()

    def label(self) -> str:
        shared = f", reachable from devices {', '.join(map(str, self.access))}" if self.access else ""
        return f"alloc {self.nbytes} B at {self.ptr:#x} on device {self.device}{shared}"


@dataclass(frozen=True)
class FreeParams:
    """Free the graph allocation at ``ptr``."""

    kind: ClassVar[NodeKind] = NodeKind.MEM_FREE
    ptr: int

    def label(self) -> str:
        return f"free {self.ptr:#x}"


@dataclass(frozen=True)
class ConditionalParams:
    """A conditional node: its bodies run as ``condition``'s value says when the node runs, set on the device by
    ``cudaGraphSetConditional`` in kernels of the graph.

    ``type``: "if" (body 0 runs if the value is not 0; a second body, the else, if it is 0), "while" (body 0
    runs again and again while the value is not 0, checked before each run) or "switch" (body ``n`` runs when
    the value is ``n``; none when it is ``len(bodies)`` or more). ``bodies``: the backend graphs of the node's
    bodies, which belong to the node (filled through ``Node.bodies``).
    """

    kind: ClassVar[NodeKind] = NodeKind.CONDITIONAL
    type: str
    condition: Any
    bodies: tuple

    def label(self) -> str:
        return f"{self.type} ({len(self.bodies)} bod{'y' if len(self.bodies) == 1 else 'ies'})"
