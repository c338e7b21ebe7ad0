"""A kernel's argument converters, made once per parameter from its C signature: one maker per kind of parameter
(a pointer, a ``cudaGraphExec_t``, a scalar of a C type gpugraph knows, one of a type it cannot tell), each checking
the kinds of argument that parameter takes (an Array, another library's device array, a Param, a Python or NumPy
number, a GraphExec, a Condition) in a fixed order, the common case first (they run on every launch and node add).

Below gpugraph._kernel, which makes a Kernel's converters here (``make_converters``) and runs them in
``Kernel.convert_args``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._conditions import Condition
from ._device_launch import KernelLaunchable, exec_argument
from ._device_like import DeviceLike
from ._foreign_arrays import kernel_argument
from ._memory import Array, reach
from ._params import Param
from ._scalars import bounds, is_number, to_c
from ._scalars import describe as _describe
from ._signature import KernelParam

# (value, device) -> the value as a launch or a node keeps it. Only a pointer's converter reads the device (a Device,
# a type above kernels: Any); the others pass it on or ignore it, and take it as an object.
Convert = Callable[[Any, Any], Any]


def make_converters(where: str, param: KernelParam) -> tuple[Convert, Convert]:
    """The converters of the argument ``where`` names, for parameter ``param``: for stream launches, and for graph
    nodes (numbers typed as ``Kernel.typed_args`` types them)."""
    if param.pointer:
        return _pointer(where, param)
    if param.graph_exec:  # a graph the kernel launches: a GraphExec names it, no number
        return _graph_exec(where)
    if param.dtype is None:
        return _unknown_scalar(where, param.ctype)
    return _known_scalar(where, param.ctype, param.dtype)


def _pointer(where: str, param: KernelParam) -> tuple[Convert, Convert]:
    """A pointer takes an Array of its data type on the device (a Param holding one, or another library's device
    array viewed as one)."""
    want = param.dtype
    addresses = " (a pointer to pointers takes an Array of device addresses)" if param.depth > 1 else ""

    def to_pointer(value: Any, device: DeviceLike) -> Any:
        if type(value) is Param:
            if not value.is_array:
                raise TypeError(f"{where}: expects a device Array, got a scalar {value!r}")
            to_pointer(value.value, device)  # the Array it points at now must fit
            return value
        if type(value) is Array:
            if value.device is not device:
                reach(device, value, where)
            # NumPy's builtin dtypes are singletons: identity settles the common case cheaply.
            if want is not None and value.dtype is not want and value.dtype != want:
                raise TypeError(f"{where}: expects {want} data{addresses}, got an Array of {value.dtype}")
            return value
        view = kernel_argument(value, device, where)  # another library's device array, viewed without a copy
        if view is not None:
            return to_pointer(view, device)
        hint = " (copy it to the device with dev.asarray first)" if isinstance(value, np.ndarray) else ""
        raise TypeError(f"{where}: expects a device Array, got {_describe(value)}{hint}")
    return to_pointer, to_pointer


def _graph_exec(where: str) -> tuple[Convert, Convert]:
    """A ``cudaGraphExec_t`` takes a GraphExec instantiated with device_launch."""

    def to_graph_exec(value: Any, device: object) -> Any:
        return exec_argument(value, device, where)
    return to_graph_exec, to_graph_exec


def _graph_object_error(value: object, where: str, ctype: str) -> TypeError:
    """The refusal of a GraphExec or a Condition passed for a scalar of C type ``ctype`` (no number: a handle)."""
    if type(value) is Condition:
        return TypeError(f"{where}: a Condition is passed only to kernels of its graph (Graph.add_kernel, or a launch "
                         f"on a stream capturing into that graph); a stream launch outside a capture cannot take one")
    return TypeError(f"{where}: a GraphExec is passed only for a cudaGraphExec_t parameter, not a C {ctype}")


def _unknown_scalar(where: str, ctype: str) -> tuple[Convert, Convert]:
    """A scalar whose C type gpugraph cannot tell takes a value carrying its own type: a NumPy scalar of a C number
    type, or a Param with a dtype."""

    def to_scalar(value: Any, device: object) -> Any:
        kind = type(value)
        if isinstance(value, KernelLaunchable) or kind is Condition:
            raise _graph_object_error(value, where, ctype)
        if kind is Param:
            if value.is_array:
                raise TypeError(f"{where}: expects a C {ctype} scalar, got {value!r}")
            if value.dtype is None:
                raise TypeError(f"{where}: gpugraph cannot tell the C type {ctype!r}; give the Param a dtype")
            return value
        if isinstance(value, np.generic):
            return own_type(value, where)
        raise TypeError(f"{where}: gpugraph cannot tell the C type {ctype!r}; "
                        f"pass a NumPy scalar of the right type, got {_describe(value)}")
    return to_scalar, to_scalar


def _known_scalar(where: str, ctype: str, dtype: np.dtype) -> tuple[Convert, Convert]:
    """A scalar of a C type gpugraph knows takes a number it holds (the rules of _scalars.to_c) or a Param of that
    type; a ``cudaGraphConditionalHandle`` takes a Condition in a graph node."""
    integral, low, high = bounds(dtype)

    def to_scalar(value: Any, device: object) -> Any:
        kind = type(value)
        # The common case first: a Python number in range for a parameter of known type stays a Python number
        # (backends write it as the C type: CUDA packs it, the CPU backend converts it). Everything else
        # (floats for integers, inf, nan, out of range) takes the rules of _scalars.to_c.
        if kind is float or kind is int:
            if (kind is int or not integral) and low <= value <= high:
                return value
            return to_c(value, dtype, ctype, where)
        if isinstance(value, KernelLaunchable) or kind is Condition:
            raise _graph_object_error(value, where, ctype)
        if kind is Param:
            if value.is_array:
                raise TypeError(f"{where}: expects a C {ctype} scalar, got {value!r}")
            value.check(dtype, where)
            return value
        return to_c(value, dtype, ctype, where)
    make = dtype.type

    def to_typed_scalar(value: Any, device: object) -> Any:
        kind = type(value)
        if (kind is float or kind is int) and (kind is int or not integral) and low <= value <= high:
            return make(value)  # (the common case, as in to_scalar)
        if kind is Condition:  # (kept: the graph checks it is one of its own, then passes its handle)
            if dtype != np.uint64:
                raise TypeError(f"{where}: a Condition is passed for a cudaGraphConditionalHandle (unsigned long "
                                f"long) parameter, not a C {ctype}")
            return value
        value = to_scalar(value, device)
        kind = type(value)
        return make(value) if kind is float or kind is int else value
    return to_scalar, to_typed_scalar


def own_type(value: np.generic, where: str) -> np.generic:
    """A NumPy scalar passed where gpugraph cannot tell the C type: it must be a C number type."""
    if not is_number(value) or value.dtype.itemsize > 8:
        raise TypeError(f"{where}: expects a NumPy bool, integer or floating scalar of at most 8 bytes (a C "
                        f"number type), got {_describe(value)}")
    return value
