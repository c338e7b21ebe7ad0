"""Kernel functions and their argument packing: the work of a launch done once per kernel."""

from __future__ import annotations

import threading
from typing import Any

from cuda.bindings import driver as cu

from ..._argpack import DTYPES, Slots, code_of, layout_of
from ..._errors import KernelCompileError
from ..._memory import Array
from ..._scalars import to_c
from ..._signature import check_compiled
from ._driver import error
from ._symbols import drv

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


class Function:
    """A loaded kernel and a reusable argument buffer laid out from its signature."""

    __slots__ = ("handle", "kernel", "_codes", "_slots", "_layout_key", "lock", "_typed", "_node_params",
                 "_node_shape", "sizes", "_kinds", "raw", "layout")

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
        self.raw = int(handle)  # the handle's value, for the compiled path
        self.kernel = kernel
        self.lock = threading.Lock()  # the slots are shared: one launch packs and launches at a time
        self._codes = b""  # each slot's code (gpugraph._argpack), and the slots
        self._slots = Slots(0)
        self._layout_key: Any = None  # the argument types the layout was made for (untyped layouts)
        # Typed: every slot's type is known from the signature. Otherwise a layout is made from the argument
        # types, per call: all of them (no signature), or those of the scalars the signature cannot type.
        self._typed = signature is not None and all(p.pointer or p.dtype is not None for p in signature)
        self._kinds: tuple[Any, ...] | None = None if signature is None else tuple(
            None if p.pointer else p.dtype if p.dtype is not None else _ASK for p in signature)
        self._node_params: Any = None  # a CUDA_KERNEL_NODE_PARAMS reused for the nodes of this kernel
        self._node_shape: Any = None  # the launch shape it was made for
        # What the compiled path writes (typed signatures only: None leaves every launch to the Python path).
        self.layout = layout_of(signature, self.raw)
        if self._typed:
            self._layout([(p.dtype, p.pointer) for p in signature])

    def _layout(self, params: list[tuple[Any, bool]]) -> None:
        self._codes = "".join([code_of(dtype, pointer) for dtype, pointer in params]).encode()
        self._slots = Slots(len(params))

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

    def copy_arguments(self) -> Slots:
        """A copy of the packed argument slots (hold ``lock``)."""
        return self._slots.copy()

    def slot_code(self, index: int) -> int:
        """The code of argument ``index``'s slot (in an untyped layout, as the last ``pack`` laid it out): what
        ``Slots.put`` takes to write just that argument (Param patches)."""
        return self._codes[index]

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
        """Write ``args`` into the slots; return the address of the kernelParams array (hold ``lock``)."""
        if not self._typed:  # some arguments carry their own types, which may change per call
            kinds = self._kinds
            key = (tuple([None if type(a) is Array else a.dtype for a in args]) if kinds is None else
                   tuple([a.dtype if k is _ASK else k for k, a in zip(kinds, args)]))
            if key != self._layout_key:
                self._check_untyped(key)
                self._layout([(d, d is None) for d in key])
                self._layout_key = key
        declined = self._slots.fill(self._codes, args)
        if declined >= 0:
            self._fill_converted(args, declined)
        return self._slots.kernel_params()

    def _fill_converted(self, args: tuple, start: int) -> None:
        """Write ``args[start:]``, each value a slot does not take as it is converted to the slot's type first: the
        value of an untyped Param, packed before the call passing it is accepted and gives the Param its
        parameter's type (the converters checked that the type holds it)."""
        slots, codes = self._slots, self._codes
        for i in range(start, len(args)):
            value = args[i]
            code = codes[i]
            if slots.put(i, code, value.ptr if type(value) is Array else value):
                continue
            if code == ord("P") or not slots.put(i, code, to_c(value, DTYPES[chr(code)], chr(code), repr(self.kernel))):
                raise TypeError(f"{self.kernel!r} argument {i}: {value!r} does not fit its slot ({chr(code)})")
