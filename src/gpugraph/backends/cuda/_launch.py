"""Kernel functions and their argument packing: the work of a launch done once per kernel."""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ..._memory import Array

# Every argument gets an 8-byte-aligned slot holding its value; kernelParams points at each slot.
_SLOT = 8


def _code(dtype: np.dtype | None, pointer: bool) -> str:
    """The struct code of one argument's value (a pointer is a 64-bit address)."""
    if pointer:
        return "Q"
    codes = {1: "b", 2: "h", 4: "i", 8: "q"}
    if dtype.kind == "f":
        codes = {2: "e", 4: "f", 8: "d"}
    elif dtype.kind in "ub":
        codes = {1: "B", 2: "H", 4: "I", 8: "Q"}
    return codes[dtype.itemsize]


def _format(dtype: np.dtype | None, pointer: bool) -> str:
    """An argument's slot: its value, padded to 8 bytes."""
    pad = _SLOT - (8 if pointer else dtype.itemsize)
    return _code(dtype, pointer) + (f"{pad}x" if pad else "")


class Function:
    """A loaded kernel and a reusable argument buffer laid out from its signature."""

    __slots__ = ("handle", "kernel", "_struct", "_pointers", "_buffer", "_layout_key", "lock", "_typed",
                 "_node_params", "_node_shape", "_address")

    def __init__(self, handle: Any, kernel: Any) -> None:
        self.handle = handle
        self.kernel = kernel
        self.lock = threading.Lock()  # the buffer is shared: one launch packs and launches at a time
        self._struct: struct.Struct | None = None
        self._layout_key: Any = None  # the argument types the layout was made for (unread signatures)
        self._typed = kernel.signature is not None
        self._node_params: Any = None  # a CUDA_KERNEL_NODE_PARAMS reused for the nodes of this kernel
        self._node_shape: Any = None  # the launch shape it was made for
        if self._typed:
            self._layout([(p.dtype, p.pointer) for p in kernel.signature])

    def _layout(self, params: list[tuple[Any, bool]]) -> None:
        self._struct = struct.Struct("<" + "".join(_format(d, p) for d, p in params))
        n = max(len(params), 1)
        self._buffer = ctypes.create_string_buffer(n * _SLOT)
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * n)(*[base + i * _SLOT for i in range(n)])
        self._address = ctypes.addressof(self._pointers)  # what kernelParams gets


    def copy_arguments(self) -> tuple[Any, Any]:
        """A copy of the packed argument buffer and an array of pointers into it (hold ``lock``)."""
        buffer = ctypes.create_string_buffer(self._buffer.raw, len(self._buffer))
        base = ctypes.addressof(buffer)
        pointers = (ctypes.c_void_p * len(self._pointers))(*[base + i * _SLOT for i in range(len(self._pointers))])
        return buffer, pointers

    @staticmethod
    def slot_offset(index: int) -> int:
        """Where argument ``index`` sits in the buffer."""
        return index * _SLOT

    def slot_format(self, index: int) -> struct.Struct:
        """The struct of argument ``index``'s slot, for writing just that argument (Param patches)."""
        param = self.kernel.signature[index]
        return struct.Struct("<" + _code(param.dtype, param.pointer))

    def new_node_params(self, grid: tuple, block: tuple, shared_mem: int) -> Any:
        """A CUDA_KERNEL_NODE_PARAMS of this kernel for a launch shape (kernelParams left to set)."""
        p = cu.CUDA_KERNEL_NODE_PARAMS()
        p.func, p.extra = self.handle, 0
        p.gridDimX, p.gridDimY, p.gridDimZ = grid
        p.blockDimX, p.blockDimY, p.blockDimZ = block
        p.sharedMemBytes = shared_mem
        return p

    def node_params(self, grid: tuple, block: tuple, shared_mem: int, args: tuple) -> Any:
        """This kernel's CUDA_KERNEL_NODE_PARAMS for a node with ``args`` packed (hold ``lock``).

        One struct, reused while the launch shape stays the same: the driver copies it and the arguments
        when a node is added or set, and making a new one costs more than the driver call.
        """
        shape = (grid, block, shared_mem)
        if shape != self._node_shape:
            self._node_params, self._node_shape = self.new_node_params(grid, block, shared_mem), shape
        p = self._node_params
        p.kernelParams = self.pack(args)
        return p

    def pack(self, args: tuple) -> int:
        """Write ``args`` into the buffer; return the address of the kernelParams array (hold ``lock``)."""
        if not self._typed:  # arguments carry their own types, which may change per call
            key = tuple(None if type(a) is Array else a.dtype for a in args)
            if key != self._layout_key:
                self._layout([(d, d is None) for d in key])
                self._layout_key = key
        self._struct.pack_into(self._buffer, 0, *[a.ptr if type(a) is Array else a for a in args])
        return self._address
