"""CPU device memory: real host buffers for plain allocations, and mapped-on-use memory for
stream-ordered and graph allocations, so that a use outside an allocation's lifetime is caught. Every buffer
ends where an inaccessible page begins, so that a kernel's access past its end faults, as a GPU's does."""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
import threading
import weakref
from collections import deque

import numpy as np

from ..._errors import GpuGraphError
from ..._memory import Array, allocation_of
from .._allocation import Allocation

# Stream-ordered and graph allocations get addresses in a range no host pointer uses, fixed when the
# allocation is made (as CUDA fixes a graph allocation's address when the node is added); memory is
# mapped to the address only while the allocation is live in stream or graph order.
VIRTUAL_BASE = 1 << 52
ALIGNMENT = 256
PAGE = mmap.PAGESIZE


def span(nbytes: int) -> int:
    """The bytes of address range an allocation of ``nbytes`` takes."""
    return max(ALIGNMENT, -(-nbytes // ALIGNMENT) * ALIGNMENT)


_libc = ctypes.CDLL(None, use_errno=True)
_mprotect = _libc.mprotect
_mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_mprotect.restype = ctypes.c_int


def guarded(nbytes: int, kind: str) -> np.ndarray:
    """``span(nbytes)`` bytes of new zeroed memory, a uint8 array whose end is where an inaccessible page begins (its
    start aligned to ALIGNMENT): a kernel's access past the end faults, and the kernel's library turns the fault into
    CUDA's illegal-address error (include/gpugraph_cpu.h). A mapping of its own, freed when nothing views it; the
    page after it takes address space, not memory (at most about vm.max_map_count / 2 such buffers live at once)."""
    size = span(nbytes)
    pages = -(-size // PAGE) * PAGE
    try:
        memory = mmap.mmap(-1, pages + PAGE, flags=mmap.MAP_PRIVATE)  # (anonymous: no file)
    except OSError as exc:
        raise MemoryError(f"cpu: out of memory: cannot map {nbytes} bytes of {kind} memory ({exc.strerror}; the "
                          f"CPU backend maps each allocation apart, followed by an inaccessible page)") from None
    buffer = np.frombuffer(memory, np.uint8, count=size, offset=pages - size)
    if _mprotect(buffer.ctypes.data + size, PAGE, 0) != 0:  # (PROT_NONE)
        reason = os.strerror(ctypes.get_errno())
        raise MemoryError(f"cpu: out of memory: cannot protect the page after {nbytes} bytes of {kind} memory "
                          f"({reason}; the system's limit on a process's mappings, vm.max_map_count, may be reached)")
    return buffer


class AddressSpace:
    """Hands out the fixed addresses of stream-ordered and graph allocations, and finds the allocation an
    address lies in: a kernel compiled for the CPU that reads such addresses from an array of device addresses
    (a ``T**`` parameter) gets them as the host addresses their memory has when it runs (``translate``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = VIRTUAL_BASE
        self._starts: list[int] = []  # sorted: the addresses of allocations made, perhaps with stale ones
        self._allocations: dict[int, weakref.ref[Allocation]] = {}
        # (address, reference) of allocations collected since the last pruning: the references' callbacks note
        # them, on any thread, perhaps while this thread holds the lock, so they only append here.
        self._dead: deque[tuple[int, weakref.ref[Allocation]]] = deque()

    def reserve(self, nbytes: int) -> int:
        with self._lock:
            ptr = self._next
            self._next += span(nbytes)
            return ptr

    def register(self, alloc: Allocation) -> None:
        """Note ``alloc`` at its address (a graph allocation may take the address of a freed one)."""
        ptr, dead = alloc.ptr, self._dead
        ref = weakref.ref(alloc, lambda ref: dead.append((ptr, ref)))
        with self._lock:
            self._prune()
            known = ptr in self._allocations
            self._allocations[ptr] = ref
            if not known:
                bisect.insort(self._starts, ptr)

    def _prune(self) -> None:
        """Drop the collected allocations (under the lock). Each is dropped, then taken off the list: an
        interrupt anywhere leaves it to be dropped again, to the same end."""
        dead, allocations, starts = self._dead, self._allocations, self._starts
        while dead:
            ptr, ref = dead[0]
            if allocations.get(ptr) is ref:  # (else an allocation made at the address since holds it)
                del allocations[ptr]
            if ptr not in allocations:
                i = bisect.bisect_left(starts, ptr)
                if i < len(starts) and starts[i] == ptr:
                    del starts[i]
            dead.popleft()

    def holding(self, address: int) -> Allocation | None:
        """The allocation whose range (its end included, as C++ pointer arithmetic allows) holds ``address``."""
        with self._lock:
            i = bisect.bisect_right(self._starts, address) - 1
            ref = self._allocations.get(self._starts[i]) if i >= 0 else None
        alloc = ref() if ref is not None else None
        return alloc if alloc is not None and address - alloc.ptr <= alloc.nbytes else None

    def translate(self, addresses: np.ndarray, what: str) -> np.ndarray | None:
        """A copy of the uint64 ``addresses`` with each address of a stream-ordered or graph allocation replaced
        by the host address of its memory now; None when none is such an address. Raises when one lies in
        memory that is not allocated now (what CUDA would read as an illegal address)."""
        virtual = np.flatnonzero((addresses >= VIRTUAL_BASE) & (addresses < self._next))
        if not len(virtual):
            return None
        out = addresses.copy()
        for j in virtual:
            address = int(addresses[j])
            alloc = self.holding(address)
            if alloc is None or alloc.buffer is None:
                raise GpuGraphError(f"{what}: element {j} is {address:#x}, the address of "
                                    f"{alloc.owner if alloc is not None else 'no allocation'}, which is not "
                                    f"allocated when the kernel runs")
            out[j] = alloc.address + (address - alloc.ptr)
        return out


ADDRESSES = AddressSpace()  # one per process: an address names one allocation on every CPU device, as in CUDA


class PinnedRegistry:
    """The address ranges of live page-locked host buffers (``pinned_empty``), views of them included."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: dict[int, int] = {}  # start -> end of each live buffer
        self._dead: deque[int] = deque()  # starts of buffers collected since the ranges were last pruned

    def add(self, buffer: np.ndarray) -> None:
        start = buffer.__array_interface__["data"][0]
        with self._lock:
            self._prune()  # first: a dead buffer at this address must not remove the new one's range
            self._ranges[start] = start + buffer.nbytes
        weakref.finalize(buffer, self._forget, start).atexit = False

    def _forget(self, start: int) -> None:
        # Runs in the garbage collector, on any thread, possibly while this thread holds the lock (inside
        # holds or add): so it only notes the start, and the next holder of the lock drops the range.
        self._dead.append(start)

    def _prune(self) -> None:
        while self._dead:
            self._ranges.pop(self._dead.popleft(), None)

    def holds(self, ptr: int, nbytes: int) -> bool:
        """Whether ``[ptr, ptr + nbytes)`` lies within one live buffer."""
        with self._lock:
            self._prune()
            return any(start <= ptr and ptr + nbytes <= end for start, end in self._ranges.items())


def block_size(nbytes: int) -> int:
    """The size of the pool block an allocation of ``nbytes`` takes: rounded up to one of four sizes per power
    of two (at most a quarter more), so that an allocation reuses blocks freed by allocations of nearby sizes."""
    if nbytes <= ALIGNMENT:
        return ALIGNMENT
    step = 1 << max((nbytes - 1).bit_length() - 3, 8)
    return -(-nbytes // step) * step


def _machine_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no such figure on this platform
        return None


MACHINE_MEMORY = _machine_memory()


def check_mappable(nbytes: int, kind: str) -> None:
    """Refuse, when it is asked for, an allocation larger than the machine's memory: the CPU backend's memory
    is host memory, and CUDA refuses at the call an allocation the device cannot hold."""
    if MACHINE_MEMORY is not None and nbytes > MACHINE_MEMORY:
        raise MemoryError(f"cpu: out of memory: cannot allocate {nbytes} bytes of {kind} memory; the CPU "
                          f"backend's memory is the machine's, {MACHINE_MEMORY} bytes in all")


class Pool:
    """A memory pool that keeps freed blocks for reuse (the device's graph pool or its async pool).

    A block is a guarded buffer (``guarded``: a mapping of its own, so releasing it gives its memory back to the OS
    at once); an allocation's memory is the block's last ``span(nbytes)`` bytes, so that the inaccessible page after
    the block is right after the allocation too. Its figures follow what CUDA reports for graph memory
    (cudaDeviceGetGraphMemAttribute): memory stays
    counted as used once a graph allocation has held it, freed or not, until ``trim`` returns it.
    ``release_threshold`` is CUDA's cudaMemPoolAttrReleaseThreshold: at each synchronize (``release``) the
    pool gives back unused blocks while it holds more than that many bytes; None never (the graph pool,
    which only ``trim`` empties, as cudaDeviceGraphMemTrim).
    """

    def __init__(self, release_threshold: int | None = None) -> None:
        self._lock = threading.Lock()
        self._free: dict[int, list[np.ndarray]] = {}  # block size -> unused blocks
        self.release_threshold = release_threshold
        self.used = self.reserved = self.used_high = self.reserved_high = 0

    def map(self, alloc: Allocation) -> None:
        """Give ``alloc`` memory, reusing a freed block of its block size when there is one (kept as the
        allocation's ``keep``, its memory's owner, until unmapped)."""
        size = block_size(alloc.nbytes)
        block = None
        with self._lock:
            blocks = self._free.get(size)
            if blocks:
                block = blocks.pop()
        if block is None:  # (mapped outside the lock: a mapping takes system calls)
            block = guarded(size, f"{alloc.origin}-ordered" if alloc.origin == "stream" else alloc.origin)
            with self._lock:
                self.reserved += size
                self.used += size
                self.reserved_high = max(self.reserved_high, self.reserved)
                self.used_high = max(self.used_high, self.used)
        alloc.keep, alloc.buffer = block, block[size - span(alloc.nbytes):]

    def unmap(self, alloc: Allocation) -> None:
        """Return ``alloc``'s memory to the pool."""
        block = alloc.keep
        if alloc.buffer is None or block is None:
            raise GpuGraphError(f"free of {alloc.owner} at {alloc.ptr:#x}: "
                                f"the memory is not allocated at this point (double free?)")
        alloc.buffer = alloc.keep = None
        with self._lock:
            self._free.setdefault(block.size, []).append(block)

    def trim(self, keep: int = 0) -> None:
        """Release blocks no allocation holds, largest first, while the pool holds more than ``keep`` bytes.

        A block's memory goes back to the OS once nothing views it (a DLPack export may, see
        ``CpuBackend.export_memory``)."""
        with self._lock:
            for size in sorted(self._free, reverse=True):
                if self.reserved <= keep:
                    break
                blocks = self._free[size]
                while blocks and self.reserved > keep:
                    blocks.pop()
                    self.reserved -= size
                    self.used -= size
                if not blocks:
                    del self._free[size]

    def release(self) -> None:
        """At a synchronize: give back what the release threshold says (nothing without one)."""
        if self._free and self.release_threshold is not None:
            self.trim(self.release_threshold)

    def reset_high(self) -> None:
        """The high watermarks start again from the figures now (cudaDeviceSetGraphMemAttribute)."""
        with self._lock:
            self.used_high, self.reserved_high = self.used, self.reserved

    def usage(self) -> dict[str, int]:
        return {"used": self.used, "reserved": self.reserved,
                "used_high": self.used_high, "reserved_high": self.reserved_high}


def _unmapped(array_or_alloc: object, alloc: Allocation) -> GpuGraphError:
    return GpuGraphError(
        f"{array_or_alloc!r} was used outside its allocation's lifetime: {alloc.owner} "
        f"is not allocated when this operation runs (before its allocation or after its free)")


def byte_view(operand: Array | np.ndarray, nbytes: int) -> np.ndarray:
    """The first ``nbytes`` bytes of an Array or NumPy array, as a writable uint8 view."""
    if type(operand) is Array:
        buffer = allocation_of(operand).buffer
        if buffer is None:
            raise _unmapped(operand, allocation_of(operand))
        return buffer[:nbytes]
    # A NumPy array: mypy narrows `type(x) is Array` only where it holds, not in the branch after it.
    return operand.reshape(-1).view(np.uint8)[:nbytes]  # type: ignore[union-attr]


def typed_view(array: Array) -> np.ndarray:
    """An Array's memory as a NumPy array of its shape and dtype, as CPU kernels receive it; a 0-d Array
    as one element in 1-D, since a kernel gets a pointer (``x[0]`` reads it, as in CUDA code)."""
    buffer = allocation_of(array).buffer
    if buffer is None:
        raise _unmapped(array, allocation_of(array))
    return buffer[:array.nbytes].view(array.dtype).reshape(array.shape or (1,))



