"""The CUDA backend's handles: small records around the driver's handles, with what gpugraph tracks."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from .._allocation import Allocation


@dataclass(frozen=True)
class ForeignKernel:
    """A kernel node that gpugraph did not make (captured from CuPy, PyTorch...): only its name is known."""

    name: str


class CudaCapture:
    """One capture: the stream it begins on, the graph it records into (once begun) and whether the driver
    still captures. The front end's Capture holds it and passes it with the calls of the streams taking part,
    which keep no capture themselves."""

    __slots__ = ("origin", "mode", "graph", "into", "active", "lock", "id")

    def __init__(self, origin: CudaStream, mode: Any, graph: CudaGraph | None) -> None:
        self.origin = origin
        self.mode = mode
        self.graph: Any = graph  # a CudaGraph; None until a capture making its own graph begins
        self.into = graph is not None
        self.active = False  # the driver captures (between a begin and an end that succeeded)
        # Held from a captured call to the queueing of its node's entry (the graph's lock, once begun).
        self.lock: Any = None if graph is None else graph.lock
        self.id = 0  # the driver's id of the capture, once begun (cuStreamGetCaptureInfo)


class CudaStream:
    __slots__ = ("handle", "index", "raw")

    def __init__(self, handle: Any, index: int) -> None:
        self.handle = handle
        self.index = index
        self.raw = int(handle)  # the handle's value, for the compiled path (_compiled)


class CudaEvent:
    __slots__ = ("handle", "index")

    def __init__(self, handle: Any, index: int) -> None:
        self.handle = handle
        self.index = index


class CudaSemaphore:
    """An imported external semaphore (CUexternalSemaphore) of device ``index``."""

    __slots__ = ("handle", "index", "timeline")

    def __init__(self, handle: Any, index: int, timeline: bool) -> None:
        self.handle = handle
        self.index = index
        self.timeline = timeline


class CudaGraph:
    """A graph, with what the driver cannot give back: the records of the nodes gpugraph's captured calls and
    memory nodes made (the front end keeps every node's record; these are what it reads from here), the graphs
    child-graph nodes embed, and host nodes' registry keys."""

    __slots__ = ("handle", "index", "params", "memory", "host_keys", "children", "pending", "foreign", "before",
                 "lock", "__weakref__")

    def __init__(self, handle: Any, index: int) -> None:
        self.handle = handle
        self.index = index
        self.params: dict[Any, Any] = {}  # captured or memory node -> params record
        # Allocation or free node -> the allocation it allocates or frees: by node, not address, since the
        # driver gives an allocation made after a free the freed allocation's address.
        self.memory: dict[Any, Allocation] = {}
        self.host_keys: dict[Any, int] = {}  # host node -> its registry key (the driver's copy is wrapped)
        self.children: dict[Any, CudaGraph] = {}  # child-graph node -> its embedded graph, with records
        # The captured calls whose nodes are not paired yet, in order: (parameter record, allocation record
        # of an allocation or free node, else None).
        self.pending: list[tuple[Any, Allocation | None]] = []
        self.foreign: set[Any] = set()  # captured nodes other libraries made (no record of gpugraph's)
        # Once a capture records into this existing graph: the nodes no capture made (there when the latest
        # capture into it began, or added since), which pairing leaves be. None: never captured into.
        self.before: set[Any] | None = None
        # Held from a captured call to the queueing of its entry, and while entries are paired with nodes,
        # so a pairing never sees a node whose entry is not queued yet.
        self.lock = threading.Lock()


class CudaExec:
    __slots__ = ("handle", "index", "host_keys", "host_stream", "memory", "source", "template", "own_keys",
                 "raw", "context", "device_launch")

    def __init__(self, handle: Any, index: int, host_keys: list[int], memory: Any, source: CudaGraph,
                 context: int) -> None:
        self.handle = handle
        self.index = index
        self.raw = int(handle)  # the handle's value, for the compiled path
        self.context = context  # the address of its device's context, which calls on its nodes are made in
        self.host_keys = host_keys
        self.host_stream: Any = None  # the stream host-node errors of the latest launch are kept for
        self.own_keys: dict[Any, int] = {}  # node -> host callable set on this exec (owned by no graph)
        self.memory = memory
        self.source = source  # the graph it was made from (or last updated with)
        self.template: CudaGraph | None = None  # its copy, made for the first launch into a capture
        # Instantiated with device_launch: uploaded again after each change, which a launch from a kernel sees only
        # once uploaded (measured on the H200: set_params and update were not seen until then).
        self.device_launch = False
