"""The operations a CPU stream task or graph node performs, shared by both paths.

Operands that are static (plain device memory, host arrays) may arrive as ready NumPy views, made once
at instantiate; stream-ordered and graph allocations arrive as Arrays and are resolved when run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..._errors import GpuGraphError
from ..._memops import bits, holds
from ..._memory import Array, allocation_of
from ..._nodes import NodeKind, WriteValue
from ..._semaphores import semaphore_handle, signal_emulated, wait_emulated
from .._allocation import Allocation
from ._load import load as load_compiled
from ._memory import Pool, byte_view, typed_view

_WIDTH_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def run_kernel(kernel: Any, launch: Any, args: tuple, device: int) -> None:
    """Run ``kernel`` over ``launch``'s grid on CPU device ``device``: its Python implementation if it has one, else
    its compiled source (the device's instance of its module)."""
    if kernel.cpu is None:
        load_compiled(kernel, device).launch(launch.grid, launch.block, launch.shared_mem, args)
    else:
        kernel.cpu(launch, *[typed_view(a) if type(a) is Array else a for a in args])


def _box_view(flat: np.ndarray, at: tuple[int, int, int], pitch: int, rows: int,
              extent: tuple[int, int, int]) -> np.ndarray:
    """The (depth, height, width-in-bytes) box at ``at`` (x in bytes, y, z) of the flat bytes ``flat``, laid out
    in rows of ``pitch`` bytes, ``rows`` rows a slice (the front end has checked it lies inside)."""
    x, y, z = at
    width, height, depth = extent
    start = x + (y + z * rows) * pitch
    return np.lib.stride_tricks.as_strided(flat[start:], shape=(depth, height, width),
                                           strides=(rows * pitch, pitch, 1))


def run_memcpy(dst: Any, src: Any, nbytes: int, box: Any = None) -> None:
    # Views made at instantiate are flat bytes already; anything else is turned into flat bytes here.
    if type(dst) is not np.ndarray or dst.dtype != np.uint8 or dst.ndim != 1:
        dst = byte_view(dst, nbytes if box is None else dst.nbytes)
    if type(src) is not np.ndarray or src.dtype != np.uint8 or src.ndim != 1:
        src = byte_view(src, nbytes if box is None else src.nbytes)
    if box is None:
        dst[:nbytes] = src[:nbytes]
        return
    _box_view(dst, box.dst_at, box.dst_pitch, box.dst_rows, box.extent)[...] = _box_view(
        src, box.src_at, box.src_pitch, box.src_rows, box.extent)


def run_memset(dst: Any, pattern: int, element_size: int, count: int, pitch: int = 0, height: int = 1,
               offset: int = 0) -> None:
    width = count * element_size
    if height == 1 and not offset:
        view = dst if type(dst) is np.ndarray and dst.ndim == 1 else byte_view(dst, width)
        view[:width].view(_WIDTH_DTYPES[element_size])[:] = pattern
        return
    flat = dst if type(dst) is np.ndarray and dst.ndim == 1 else byte_view(dst, dst.nbytes)
    rows = np.lib.stride_tricks.as_strided(flat[offset:], shape=(height, width), strides=(pitch, 1))
    rows.view(_WIDTH_DTYPES[element_size])[...] = pattern


def run_semaphores(params: Any) -> None:
    """Signal or wait on the emulated semaphores of a SemaphoreSignalParams or SemaphoreWaitParams, in order: a wait
    blocks the stream or graph branch that runs it until the host (or other work) signals."""
    signal = params.kind is NodeKind.SEMAPHORE_SIGNAL
    for semaphore, value in zip(params.semaphores, params.values):
        emulated = semaphore_handle(semaphore)
        if signal:
            signal_emulated(emulated, value if emulated.timeline else None)
        else:
            wait_emulated(emulated, value if emulated.timeline else None)


def run_mem_ops(params: Any) -> None:
    """Run a MemOpsParams' operations in order: a write stores its value, a wait polls its element until the
    condition holds (as the GPU's front end does), blocking the stream or graph branch that runs it."""
    for op in params.ops:
        _, width, value = bits(op)
        element = typed_view(op.target).reshape(-1)[op.index:op.index + 1].view(f"u{width // 8}")
        if isinstance(op, WriteValue):
            element[0] = value
            continue
        pause = 1e-6
        while not holds(op.condition, int(element[0]), value, width):
            time.sleep(pause)
            pause = min(2 * pause, 1e-3)  # (quick for a value already on its way; cheap for a long wait)


def _pool(alloc: Allocation) -> Pool:
    """The pool of a stream-ordered or graph allocation, the only kinds that are mapped and unmapped."""
    pool = alloc.pool
    if pool is None:  # a bug in gpugraph, not a user's mistake
        raise GpuGraphError(f"cpu: {alloc.origin} memory at {alloc.ptr:#x} has no pool to map it in")
    return pool


def map_allocation(alloc: Allocation) -> None:
    """An allocation node or stream alloc: memory is mapped when the work reaches it."""
    pool = _pool(alloc)
    if alloc.buffer is not None:  # an earlier launch's memory, freed by auto_free_on_launch
        pool.unmap(alloc)
    pool.map(alloc)


def unmap_allocation(alloc: Allocation) -> None:
    _pool(alloc).unmap(alloc)


def static_operand(operand: Any, nbytes: int) -> Any:
    """A byte view made now when the operand's memory never moves, else the operand itself."""
    if type(operand) is Array and allocation_of(operand).origin != "device":
        return operand
    return byte_view(operand, nbytes)


def static_arg(arg: Any) -> Any:
    """A kernel argument as a NumPy view made now when its memory never moves."""
    if type(arg) is Array and allocation_of(arg).origin == "device":
        return typed_view(arg)
    return arg
