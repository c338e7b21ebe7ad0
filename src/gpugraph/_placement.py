"""Placement: which device an operation's operands and kernels must be on, and loading a kernel onto a device."""

from __future__ import annotations

from typing import Any, TypeVar

from ._device_like import DeviceLike
from ._kernel import Kernel, check_total_shared_mem, keep_function, loaded_function
from .backends import get_backend

D = TypeVar("D", bound=DeviceLike)


def load_kernel(device: DeviceLike, kernel: Kernel) -> Any:
    """The backend's function handle for ``kernel``, compiled on first use on ``device``."""
    function = loaded_function(kernel, device)
    if function is None:
        function = get_backend(device.backend).kernel_load(device.index, kernel)
        keep_function(kernel, device, function)
    return function


def check_shared(device: DeviceLike, kernel: Kernel, shared_mem: int) -> None:
    """Refuse ``shared_mem`` bytes of dynamic shared memory that pass a launch's limit with ``kernel``'s static
    shared memory on ``device`` (the common launch, with none, asks nothing)."""
    if shared_mem:
        static = get_backend(device.backend).kernel_static_shared(device.index, kernel)
        check_total_shared_mem(kernel, static, shared_mem)


def sibling(device: D, index: int) -> D:
    """The device of ``device``'s backend at ``index`` (``device`` itself, for its own)."""
    # (type(device) is Device, which placement cannot import: _device imports the modules that use placement)
    return device if index == device.index else type(device)(f"{device.backend}:{index}")


def graph_node_device(graph_device: D, device: object, what: str) -> D:
    """The device a graph node given ``device=`` runs on: the graph's for None, else a device of its backend."""
    if device is None:
        return graph_device
    if not isinstance(device, type(graph_device)):  # (the Device class, which sits above this module)
        raise TypeError(f"{what}(device): expected a Device or None, got {type(device).__name__}")
    if device.backend != graph_device.backend:
        raise ValueError(f"{what}(device): {device} is a device of another backend than the graph's ({graph_device})")
    return device


def check_same_device(device: DeviceLike, value: Any, what: str) -> None:
    """Refuse an operand (Array, Event) of a device other than ``device``."""
    other = getattr(value, "device", None)
    # (type(device): the Device class, as in sibling)
    if isinstance(other, type(device)) and other is not device:
        raise ValueError(f"{what}: {value!r} belongs to {other}, not {device}")


def check_same_backend(device: DeviceLike, value: Any, what: str) -> None:
    """Refuse an operand (Array, Event) of another backend's device; any device of ``device``'s backend will do."""
    other = getattr(value, "device", None)
    # (type(device): the Device class, as in sibling)
    if isinstance(other, type(device)) and other.backend != device.backend:
        raise ValueError(f"{what}: {value!r} belongs to {other}, a device of another backend than {device}")
