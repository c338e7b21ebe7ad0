"""The one allocation record every backend makes and the front end reads (``Array._alloc``)."""

from __future__ import annotations

from typing import Any

import numpy as np


class Allocation:
    """One allocation of device memory.

    ``origin`` is "device" (cudaMalloc, or memory another library allocated), "stream" (cudaMallocAsync) or
    "graph" (an allocation node). ``live`` is the host-side view of stream-ordered and graph allocations: True
    from the submission of the allocation until the submission of its free, which is what double-free checks
    use. ``owner`` says what the memory is, for error messages. ``buffer`` and ``pool`` are the CPU backend's
    (its memory while mapped, and the pool that maps it), and ``address`` (the host address of ``buffer``, 0 while
    there is none: what a CPU kernel is passed for the memory, set with ``buffer``); other backends leave them None
    (and 0). ``keep``: what the memory
    depends on, held as long as the record (page-locked host memory that kernels reach, ``mem_host_mapped``: its
    NumPy array and its page-locking; a CPU pool allocation's block, whose last bytes are its memory, while
    mapped). ``access``: the indices
    of the other devices that may use a graph allocation (its node's access descriptors).
    """

    __slots__ = ("ptr", "nbytes", "origin", "index", "live", "owner", "_buffer", "address", "pool", "access", "keep",
                 "__weakref__")

    def __init__(self, ptr: int, nbytes: int, origin: str, index: int, owner: str = "", buffer: Any = None,
                 pool: Any = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.origin = origin
        self.index = index  # the device's
        self.live = False
        self.owner = owner or f"the {origin} allocation at {ptr:#x}"
        self.buffer = buffer
        self.pool = pool
        self.access: tuple[int, ...] = ()
        self.keep: Any = None

    @property
    def buffer(self) -> Any:
        """The memory while mapped (a NumPy uint8 array), else None (the CPU backend's)."""
        return self._buffer

    @buffer.setter
    def buffer(self, memory: np.ndarray | None) -> None:
        self._buffer = memory
        self.address = 0 if memory is None else memory.ctypes.data
