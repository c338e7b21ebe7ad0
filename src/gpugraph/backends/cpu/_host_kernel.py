"""Compiled kernels launched from Python: a HostModule's kernel with its arguments packed into 8-byte slots,
its blocks run in parallel on worker threads (the threads of a block run one after another, as fibers when the
library calls a barrier, ``__syncthreads``, else in a plain loop), and what stops it raised as CUDA's error; a
launch in a graph also gives the kernel the log of the graphs it launches and the conditions it may set.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import threading
from typing import Any

import numpy as np

from ..._argpack import DTYPES, Slots
from ..._errors import BackendError, KernelCompileError
from ..._memory import Array, allocation_of
from ..._signature import ADDRESS_DTYPE, check_compiled
from ._compile import HostModule
from ._memory import ADDRESSES, ALIGNMENT, PAGE, typed_view

_ADDRESS = ord("P")  # the slot code of an address
# A launch's grid and block as the entry points read them (const), made once per shape.
_DIMS: dict[tuple[tuple[int, int, int], tuple[int, int, int]], Any] = {}
_DIMS_KEPT = 1024
# CUDA's error for each way a kernel stops (the entry point's status: 1 + the header's TrapKind).
_TRAPS = {2: "CUDA_ERROR_ASSERT", 3: "CUDA_ERROR_LAUNCH_FAILED", 4: "CUDA_ERROR_NOT_SUPPORTED",
          5: "CUDA_ERROR_ILLEGAL_ADDRESS"}
# Launches with fewer threads in all run on the calling thread: splitting them costs more than it saves.
PARALLEL_THREADS = 1 << 15
WORKERS = os.cpu_count() or 1


DEVICE_LAUNCHES = 256  # the launches one kernel launch may ask (gg::kDeviceLaunches of the header)


class _DeviceLaunches(ctypes.Structure):
    """The header's gg::DeviceLaunches: a launch's log of the graphs its kernel launched."""

    _fields_ = [("current", ctypes.c_uint64), ("count", ctypes.c_uint64),
                ("entries", ctypes.c_uint64 * (2 * DEVICE_LAUNCHES)), ("running", ctypes.c_void_p),
                ("running_slots", ctypes.c_uint64), ("conditions", ctypes.c_void_p),
                ("condition_count", ctypes.c_uint64)]


_LOGS = threading.local()  # each thread's _DeviceLaunches, given to the kernels of graphs it runs
# The ids of the executable graphs running now (0: a free slot), which the header's cudaGraphLaunch reads: the
# executor marks them (backends.cpu._executor).
RUNNING = np.zeros(1024, np.uint64)


class HostKernel:
    """One kernel of a HostModule, launched from Python: arguments packed into 8-byte slots, blocks spread
    over the workers."""

    def __init__(self, module: HostModule, kernel: Any) -> None:
        index = module.names.index(kernel.name)
        self.kernel = kernel
        self.module = module
        self._run = getattr(module.library, f"gg_run_{index}")
        self._run.argtypes = (ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p, ctypes.c_longlong, ctypes.c_longlong,
                              ctypes.c_int)
        self._module = module
        self._run.restype = ctypes.c_int
        codes_of = getattr(module.library, f"gg_codes_{index}")
        codes_of.restype = ctypes.c_char_p
        self.codes: str = codes_of().decode()
        if "x" in self.codes:
            at = self.codes.index("x")
            what = f"parameter {at}" + (f" ({kernel.signature[at]})" if kernel.signature else "")
            raise KernelCompileError(kernel.name, f"{what} is neither a pointer nor a number type (bool, an "
                                                  f"integer, float, double or __half): the CPU backend cannot pass "
                                                  f"it (a struct by value, say)")
        signature = kernel.signature
        refusal = check_compiled(signature, [8 if c == "P" else DTYPES[c].itemsize for c in self.codes])
        if refusal is None and signature is not None:
            for i, (param, code) in enumerate(zip(signature, self.codes)):
                if param.pointer != (code == "P") or (
                        not param.pointer and param.dtype is not None and param.dtype != DTYPES[code]):
                    refusal = (f"gpugraph refuses to load it: parameter {i} ({param}) reads from the source as "
                               f"{'a pointer' if param.pointer else param.dtype}, but the compiled kernel takes "
                               f"{'a pointer' if code == 'P' else DTYPES[code]}")
                    break
        if refusal is not None:
            raise KernelCompileError(kernel.name, refusal)
        self.static_shared = module.static_shared[index]
        # The parameters that take arrays of device addresses (T**), whose addresses a launch translates.
        self._address_params = frozenset(i for i, p in enumerate(signature or ()) if p.depth >= 2)

    def _slots(self, args: tuple) -> tuple[Slots, list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                                           list[tuple[int, Array | np.ndarray, int, np.ndarray]]]:
        """The arguments as the kernel reads them, each in an 8-byte slot, an array as its address, and one slot
        more, zero, for the launch's log of the graphs the kernel launches (``launch`` sets it); for each
        array of device addresses that holds stream-ordered or graph allocations, (the array, the translated
        copy the kernel gets, the copy as sent), so that the kernel's writes to it can be carried back; and
        (position, array, host address, its memory) of each array passed, to name the one an illegal address lies
        past, and to keep its memory mapped while the kernel runs."""
        if len(args) != len(self.codes):
            raise TypeError(f"{self.kernel!r} takes {len(self.codes)} arguments, got {len(args)}")
        slots = Slots(len(args) + 1)
        translated = []
        arrays: list[tuple[int, Array | np.ndarray, int, np.ndarray]] = []
        for i, (arg, code) in enumerate(zip(args, self.codes)):
            if code == "P":
                if type(arg) is Array:
                    alloc = allocation_of(arg)  # (its memory's address, while mapped: the common case, cheaply)
                    buffer, address = alloc.buffer, alloc.address
                    if buffer is not None and address and i not in self._address_params:
                        arrays.append((i, arg, address, buffer))  # (the buffer held: mapped until the kernel ends)
                        slots.put(i, _ADDRESS, address)
                        continue
                    arg = typed_view(arg)  # (refuses unmapped memory)
                if not isinstance(arg, np.ndarray):
                    raise TypeError(f"{self.kernel!r} argument {i}: expects a device Array, got {type(arg).__name__}")
                if i in self._address_params and arg.dtype == ADDRESS_DTYPE:
                    what = f"{self.kernel!r} argument {i} ({self.kernel.signature[i]})"
                    copy = ADDRESSES.translate(arg.reshape(-1), what)
                    if copy is not None:
                        translated.append((arg.reshape(-1), copy, copy.copy()))
                        arg = copy
                address = arg.ctypes.data
                arrays.append((i, arg, address, arg))
                slots.put(i, _ADDRESS, address)
            elif not slots.put(i, ord(code), arg):
                raise TypeError(f"{self.kernel!r} argument {i}: the compiled kernel takes a {DTYPES[code]} scalar, "
                                f"got {arg!r} ({type(arg).__name__})")
        return slots, translated, arrays

    def launch(self, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int, args: tuple,
               current: int | None = None, conditions: np.ndarray | None = None) -> list[tuple[int, int]]:
        """Run the kernel over the whole grid; returns when every block has run. ``current``: the number of the
        executable graph the launch runs in (None: outside a graph), and ``conditions`` its conditions (uint64
        pairs of a handle and its value's address: those cudaGraphSetConditional may set); then the graphs the
        kernel launched, as (number, mode) pairs in the order asked (cudaGraphLaunch's: 1 tail, 2 fire and forget,
        3 sibling)."""
        packed, translated, arrays = self._slots(args)
        log = None
        if current is not None:  # (the thread's own log: read before this thread runs anything else)
            log = getattr(_LOGS, "log", None)
            if log is None:
                log = _LOGS.log = _DeviceLaunches()
                log.running, log.running_slots = RUNNING.ctypes.data, len(RUNNING)
            log.current, log.count = current, 0
            if conditions is None or not len(conditions):
                log.conditions, log.condition_count = None, 0
            else:
                log.conditions, log.condition_count = conditions.ctypes.data, len(conditions) // 2
            packed.put(len(args), _ADDRESS, ctypes.addressof(log))
        slots = packed.raw()
        dims = _DIMS.get((grid, block))
        if dims is None:
            dims = (ctypes.c_uint * 6)(*grid, *block)
            if len(_DIMS) < _DIMS_KEPT:
                _DIMS[grid, block] = dims
        blocks = grid[0] * grid[1] * grid[2]
        chunks = min(WORKERS, blocks) if blocks * block[0] * block[1] * block[2] >= PARALLEL_THREADS else 1
        try:
            if chunks == 1 or self._module.parallel:  # (with OpenMP, the call spreads the blocks over the cores itself)
                self._check(self._run_blocks(dims, shared_mem, slots, 0, blocks, chunks), arrays)
            else:
                bounds = [blocks * k // chunks for k in range(chunks + 1)]
                futures = [_workers().submit(self._run_blocks, dims, shared_mem, slots, bounds[k], bounds[k + 1], 1)
                           for k in range(1, chunks)]
                outcomes = [self._run_blocks(dims, shared_mem, slots, bounds[0], bounds[1], 1)]
                outcomes += [future.result() for future in futures]
                for outcome in outcomes:
                    self._check(outcome, arrays)
        finally:
            for array, copy, sent in translated:
                _carry_back(array, copy, sent)
        if log is None:
            return []
        asked = min(log.count, DEVICE_LAUNCHES)
        return [(log.entries[2 * i], log.entries[2 * i + 1]) for i in range(asked)]

    def _run_blocks(self, dims: Any, shared_mem: int, slots: bytes, begin: int, end: int,
                    workers: int) -> tuple[int, bytes, int]:
        """Run blocks [begin, end); the status, and the message and the illegal address (0: none) of a trap that
        stopped them (read on this thread, which the library keeps them for)."""
        status = self._run(dims, shared_mem, slots, begin, end, workers)
        if not status:
            return status, b"", 0
        return status, self._module.stop_message(), self._module.stop_address()

    def _check(self, outcome: tuple[int, bytes, int],
               arrays: list[tuple[int, Array | np.ndarray, int, np.ndarray]]) -> None:
        """Raise what stopped the kernel: CUDA's error for it (a failed assert, a trap's launch failure, an illegal
        address, which is named as past the end of one of the ``arrays`` passed where it lies in the page that
        follows it)."""
        status, message, address = outcome
        if status == 0:
            return
        code = _TRAPS.get(status)
        if code is None:  # (the entry points return 0, 2, 3, 4 or 5: any other status is a bug in gpugraph's header)
            raise RuntimeError(f"{self.kernel!r}: the compiled CPU kernel returned status {status}")
        detail = f"the kernel stopped: {message.decode(errors='replace')}"
        for i, array, start, _ in arrays if address else ():
            end = start + array.nbytes
            if end <= address < end + ALIGNMENT + PAGE:  # (the allocation's last bytes, then its guard page)
                param = self.kernel.signature[i] if self.kernel.signature else f"parameter {i}"
                detail += (f", {address - end} bytes past the end of argument {i} ({param}: {array.size} "
                           f"{array.dtype})")
                break
        raise BackendError("cpu", f"{self.kernel!r}", code, detail)


def _carry_back(array: np.ndarray, copy: np.ndarray, sent: np.ndarray) -> None:
    """Write into ``array`` (device addresses) the elements the kernel changed in its translated ``copy``, a host
    address of an allocation's memory as sent turned back into that allocation's device address."""
    changed = np.flatnonzero(copy != sent)
    if len(changed):
        device_address = {int(host): int(device) for host, device in zip(sent, array) if host != device}
        array[changed] = [device_address.get(int(copy[j]), int(copy[j])) for j in changed]


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _workers() -> concurrent.futures.ThreadPoolExecutor:
    """The threads that run a launch's blocks beside the launching thread (ctypes releases the GIL)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max(WORKERS - 1, 1), thread_name_prefix="gpugraph-cpu-kernel")
        return _pool
