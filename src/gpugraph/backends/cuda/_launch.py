"""Kernel functions and their argument packing: the work of a launch done once per kernel."""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any

import numpy as np
from cuda.bindings import driver as cu

from ..._errors import KernelCompileError
from ..._memory import Array
from ..._signature import check_compiled
from ._driver import error
from ._symbols import drv

# Every argument gets an 8-byte-aligned slot holding its value; kernelParams points at each slot.
_SLOT = 8
_ASK = object()  # in Function._kinds: a scalar of a type the signature does not tell (the argument's own)


def param_sizes(handle: Any) -> tuple[int, ...] | None:
    """The bytes of each parameter of a loaded kernel, as the driver reports them (None: it cannot tell).

    cuFuncGetParamInfo (CUDA 12.4; hipKernelGetParamInfo in HIP) answers CUDA_ERROR_INVALID_VALUE past the
    last parameter.
    """
    get = getattr(drv, "func_get_param_info", None)
    if get is None:
        return None
    sizes: list[int] = []
    while True:
        err, _offset, size = get(handle, len(sizes))
        if err == cu.CUresult.CUDA_ERROR_INVALID_VALUE:
            return tuple(sizes)
        if err == cu.CUresult.CUDA_ERROR_NOT_SUPPORTED:
            return None
        if err:
            raise error("cuFuncGetParamInfo", err)
        sizes.append(int(size))


def _code(dtype: np.dtype | None, pointer: bool) -> str:
    """The struct code of one argument's value (a pointer, or an Array where dtype is None: a 64-bit address)."""
    if pointer or dtype is None:
        return "Q"
    if dtype.kind == "b":
        return "?"  # a C bool: 0 or 1 (struct's integer codes refuse np.bool_)
    codes = {1: "b", 2: "h", 4: "i", 8: "q"}
    if dtype.kind == "f":
        codes = {2: "e", 4: "f", 8: "d"}
    elif dtype.kind in "ub":
        codes = {1: "B", 2: "H", 4: "I", 8: "Q"}
    return codes[dtype.itemsize]


def fast_layout(signature: Any) -> tuple[bytes, tuple[Any, ...]]:
    """A fully typed signature's slots for the compiled path (``_fast.pack``): one code per slot (b"P" a
    pointer, else the scalar's struct code) and what each slot wants: a pointer slot the dtype of its data
    (None: any), a scalar slot the NumPy scalar type a graph node keeps its value as."""
    # (A graph a kernel launches, "G", is no code the compiled path writes: a GraphExec takes the Python path, which
    # checks it, and nothing else may pass for it.)
    codes = b"".join(b"P" if p.pointer else b"G" if p.graph_exec
                     else _code(p.dtype, False).encode() for p in signature)
    return codes, tuple(p.dtype if p.pointer else p.dtype.type for p in signature)


def _format(dtype: np.dtype | None, pointer: bool) -> str:
    """An argument's slot: its value, padded to 8 bytes."""
    pad = _SLOT - (8 if pointer or dtype is None else dtype.itemsize)
    return _code(dtype, pointer) + (f"{pad}x" if pad else "")


class Function:
    """A loaded kernel and a reusable argument buffer laid out from its signature."""

    __slots__ = ("handle", "kernel", "_struct", "_pointers", "_buffer", "_layout_key", "lock", "_typed",
                 "_node_params", "_node_shape", "_address", "sizes", "_kinds", "raw", "fast_codes", "fast_wants")

    def __init__(self, handle: Any, kernel: Any) -> None:
        """Raises KernelCompileError if the signature read from the source disagrees with the compiled
        kernel's parameters (count or sizes): packing by it would pass the kernel wrong values; ValueError if the
        signature given for compiled code does (``Module.function``, ``Kernel.from_function``)."""
        signature = kernel.signature
        self.sizes = param_sizes(handle)  # what the compiled kernel takes, per parameter
        mismatch = check_compiled(signature, self.sizes, given=not kernel.from_source)
        if mismatch is not None:
            if not kernel.from_source:
                raise ValueError(f"{kernel!r} (signature={', '.join(map(str, signature or ())) or 'void'!r}): "
                                 f"{mismatch}")
            raise KernelCompileError(kernel.name, mismatch)
        self.handle = handle
        self.raw = int(handle)  # the handle's value, for the compiled path (_compiled)
        self.kernel = kernel
        self.lock = threading.Lock()  # the buffer is shared: one launch packs and launches at a time
        self._struct: struct.Struct | None = None
        self._layout_key: Any = None  # the argument types the layout was made for (untyped layouts)
        # Typed: every slot's type is known from the signature. Otherwise a layout is made from the argument
        # types, per call: all of them (no signature), or those of the scalars the signature cannot type.
        self._typed = signature is not None and all(p.pointer or p.dtype is not None for p in signature)
        self._kinds: tuple[Any, ...] | None = None if signature is None else tuple(
            None if p.pointer else p.dtype if p.dtype is not None else _ASK for p in signature)
        self._node_params: Any = None  # a CUDA_KERNEL_NODE_PARAMS reused for the nodes of this kernel
        self._node_shape: Any = None  # the launch shape it was made for
        # The compiled path packs typed layouts only (None: it leaves every launch to the Python path).
        layout = fast_layout(signature) if self._typed else None
        self.fast_codes: bytes | None = None if layout is None else layout[0]
        self.fast_wants: tuple[Any, ...] | None = None if layout is None else layout[1]
        if self._typed:
            self._layout([(p.dtype, p.pointer) for p in signature])

    def _layout(self, params: list[tuple[Any, bool]]) -> None:
        self._struct = struct.Struct("<" + "".join(_format(d, p) for d, p in params))
        n = max(len(params), 1)
        self._buffer = ctypes.create_string_buffer(n * _SLOT)
        base = ctypes.addressof(self._buffer)
        self._pointers = (ctypes.c_void_p * n)(*[base + i * _SLOT for i in range(n)])
        self._address = ctypes.addressof(self._pointers)  # what kernelParams gets

    def _check_untyped(self, key: tuple) -> None:
        """Refuse arguments whose own types do not fit the compiled kernel's parameters (count and sizes)."""
        sizes = self.sizes
        if sizes is None:
            return
        if len(key) != len(sizes):
            raise TypeError(f"{self.kernel!r} takes {len(sizes)} arguments (the compiled kernel's parameters), "
                            f"got {len(key)}")
        for index, (dtype, size) in enumerate(zip(key, sizes)):
            got = 8 if dtype is None else dtype.itemsize
            if got != size:
                what = "an Array (a pointer, 8 bytes)" if dtype is None else f"{dtype} ({got} bytes)"
                raise TypeError(f"{self.kernel!r} argument {index}: the compiled kernel takes {size} bytes there, "
                                f"got {what}")

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
        """The struct of argument ``index``'s slot, for writing just that argument (Param patches; in an
        untyped layout, as the last ``pack`` laid it out)."""
        if self._typed:
            param = self.kernel.signature[index]
            return struct.Struct("<" + _code(param.dtype, param.pointer))
        kind: Any = self._kinds[index] if self._kinds is not None else _ASK  # a dtype, None (an Array) or _ASK
        dtype = self._layout_key[index] if kind is _ASK else kind
        return struct.Struct("<" + _code(dtype, dtype is None))

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
        if not self._typed:  # some arguments carry their own types, which may change per call
            kinds = self._kinds
            key = (tuple([None if type(a) is Array else a.dtype for a in args]) if kinds is None else
                   tuple([a.dtype if k is _ASK else k for k, a in zip(kinds, args)]))
            if key != self._layout_key:
                self._check_untyped(key)
                self._layout([(d, d is None) for d in key])
                self._layout_key = key
        # _struct is laid out by now: in __init__ (typed), else above (no key equals the initial None).
        self._struct.pack_into(  # type: ignore[union-attr]
            self._buffer, 0, *[a.ptr if type(a) is Array else a for a in args])
        return self._address
