"""Memory operations: waiting for a value in device memory and writing one, in stream order (hipStreamWaitValue32/64,
hipStreamWriteValue32/64) and as batch memory-op nodes (hipGraphAddBatchMemOpNode): the checks every backend shares
and the wait conditions' meaning."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._device_like import DeviceLike
from ._memory import Array
from ._nodes import MemOpsParams, WaitValue, WriteValue
from ._placement import check_same_device
from ._scalars import as_int

CONDITIONS = ("geq", "eq", "and", "nor")


def _checked(device: DeviceLike, op: Any, what: str) -> WaitValue | WriteValue:
    """``op`` checked, with its index and value as plain ints."""
    if not isinstance(op, (WaitValue, WriteValue)):
        raise TypeError(f"{what}: expected gg.WaitValue or gg.WriteValue operations, got {type(op).__name__}")
    target = op.target
    if type(target) is not Array:
        raise TypeError(f"{what}: {op!r}: target must be a device Array, got {type(target).__name__}")
    check_same_device(device, target, f"{what}(target)")
    if target.dtype.kind not in "iu" or target.dtype.itemsize not in (4, 8):
        raise TypeError(f"{what}: {op!r}: target must hold 4- or 8-byte integers (CUDA's 32- and 64-bit memory "
                        f"operations), got {target.dtype}")
    index = as_int(op.index)
    if index is None or not 0 <= index < target.size:
        raise ValueError(f"{what}: {op!r}: index must be an int from 0 to {target.size - 1}, got {op.index!r}")
    info = np.iinfo(target.dtype)
    value = as_int(op.value)
    if value is None or not info.min <= value <= info.max:
        raise ValueError(f"{what}: {op!r}: value must be an int that {target.dtype} holds ({info.min} to {info.max}), "
                         f"got {op.value!r}")
    if isinstance(op, WaitValue):
        if op.condition not in CONDITIONS:
            raise ValueError(f"{what}: {op!r}: condition must be one of {', '.join(CONDITIONS)}, got {op.condition!r}")
        return WaitValue(target, value, op.condition, index)  # (plain ints: the driver's fields take them)
    return WriteValue(target, value, index)


def mem_ops_record(device: DeviceLike, ops: Any, what: str) -> MemOpsParams:
    """A batch memory-op node's record on ``device``: one operation or a non-empty sequence of them, each checked."""
    found = (ops,) if isinstance(ops, (WaitValue, WriteValue)) else ops
    if not isinstance(found, (list, tuple)):
        raise TypeError(f"{what}: expected a gg.WaitValue, a gg.WriteValue or a list of them, got {type(ops).__name__}")
    if not found:
        raise ValueError(f"{what}: no operations given (a node of none does nothing; add an empty node instead)")
    return MemOpsParams(tuple(_checked(device, op, what) for op in found))


def bits(op: Any) -> tuple[int, int, int]:
    """(the address of the operation's element, its width in bits, its value's bit pattern as an unsigned int)."""
    dtype = op.target.dtype
    pattern = int(np.array(op.value, dtype).view(f"u{dtype.itemsize}"))
    return op.target.ptr + op.index * dtype.itemsize, dtype.itemsize * 8, pattern


def holds(condition: str, current: int, value: int, width: int) -> bool:
    """Whether memory holding ``current`` (unsigned, ``width`` bits) meets ``condition`` against ``value``, as CUDA's
    wait operations decide: "geq" compares cyclically, (current - value) as a signed ``width``-bit integer >= 0."""
    mask = (1 << width) - 1
    if condition == "geq":
        return ((current - value) & mask) < (1 << (width - 1))
    if condition == "eq":
        return current == value
    if condition == "and":
        return (current & value) != 0
    return (~(current | value) & mask) != 0  # "nor"


def shape_of(params: MemOpsParams) -> tuple[tuple[str, int], ...]:
    """What an executable graph's batch memory-op node keeps (the driver refuses a change of it, measured on the
    H200): each operation's kind and width."""
    return tuple(("wait" if isinstance(op, WaitValue) else "write", op.target.dtype.itemsize * 8)
                 for op in params.ops)
