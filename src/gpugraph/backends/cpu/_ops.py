"""The operations a CPU stream task or graph node performs, shared by both paths.

Operands that are static (plain device memory, host arrays) may arrive as ready NumPy views, made once
at instantiate; stream-ordered and graph allocations arrive as Arrays and are resolved when run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._errors import GpuGraphError
from ..._memory import Array
from .._allocation import Allocation
from ._compile import load as load_compiled
from ._memory import Pool, byte_view, typed_view

_WIDTH_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def run_kernel(kernel: Any, launch: Any, args: tuple) -> None:
    """Run ``kernel`` over ``launch``'s grid: its Python implementation if it has one, else its compiled source."""
    if kernel.cpu is None:
        load_compiled(kernel).launch(launch.grid, launch.block, launch.shared_mem, args)
    else:
        kernel.cpu(launch, *[typed_view(a) if type(a) is Array else a for a in args])


def run_memcpy(dst: Any, src: Any, nbytes: int) -> None:
    # Views made at instantiate are flat bytes already; anything else is turned into flat bytes here.
    if type(dst) is not np.ndarray or dst.dtype != np.uint8 or dst.ndim != 1:
        dst = byte_view(dst, nbytes)
    if type(src) is not np.ndarray or src.dtype != np.uint8 or src.ndim != 1:
        src = byte_view(src, nbytes)
    dst[:nbytes] = src[:nbytes]


def run_memset(dst: Any, pattern: int, element_size: int, count: int) -> None:
    view = dst if type(dst) is np.ndarray and dst.ndim == 1 else byte_view(dst, count * element_size)
    view[:count * element_size].view(_WIDTH_DTYPES[element_size])[:] = pattern


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
    if type(operand) is Array and operand._alloc.origin != "device":
        return operand
    return byte_view(operand, nbytes)


def static_arg(arg: Any) -> Any:
    """A kernel argument as a NumPy view made now when its memory never moves."""
    if type(arg) is Array and arg._alloc.origin == "device":
        return typed_view(arg)
    return arg
