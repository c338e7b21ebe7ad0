"""HostRegistration: a NumPy array's memory page-locked for the devices (hipHostRegister, cudaHostRegister)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ._device_like import DeviceLike
from ._memory import Array, byte_bounds, host_buffer
from ._scalars import as_bool, describe
from .backends import get_backend
from .backends._host_registry import HostRegistrationError

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is Python 3.11+


class HostRegistration:
    """The memory of a NumPy array page-locked for every device of a backend, until ``release`` (or the end of a
    ``with`` block); made by ``Device.register_host``.

    Copies to and from page-locked memory run as DMA at their turn, asynchronously to the host; graph and captured
    copies page-lock their NumPy operands themselves, so registering is for stream copies that should not wait, and for
    kernels reading or writing the memory in place through ``device_array``. The whole block of memory the array lies in
    is registered (the array that owns its data, or the buffer it was made over), once for every registration and copy
    using it: it stays page-locked while any of them does, whatever the order of releases.

    Attributes:
        array: The NumPy array (kept alive while registered).
        device: The Device it was registered through (every device of its backend sees it page-locked).
        read_only: Whether the devices only read it (``hipHostRegisterReadOnly``): as asked, or, where not said,
            whether the array is read-only (``flags.writeable`` False, as a read-only memory map's is).

    See also: hipHostRegister / cudaHostRegister (portable and mapped: every device, and its address for kernels),
    hipHostUnregister / cudaHostUnregister.
    """

    __slots__ = ("array", "device", "read_only", "_pin", "_released", "__weakref__")

    def __init__(self, device: DeviceLike, array: object, read_only: bool | None) -> None:
        """(Made by ``Device.register_host``.)"""
        if not isinstance(array, np.ndarray):
            raise TypeError(f"register_host(array): expected a NumPy array, got {type(array).__name__}")
        if read_only is None:
            read_only = not array.flags.writeable
        elif as_bool(read_only) is None:
            raise TypeError(f"register_host(read_only): expected a bool, got {describe(read_only)}")
        elif not read_only and not array.flags.writeable:
            raise ValueError("register_host(array): the array is read-only (its flags.writeable is False), so the "
                             "devices may only read it: register it with read_only=True (or leave read_only out)")
        read_only = bool(read_only)
        if array.dtype.hasobject:
            raise TypeError(f"register_host(array): the array has dtype {array.dtype}, which holds Python objects; "
                            f"devices can use plain data only")
        if not array.nbytes:
            raise ValueError(f"register_host(array): the array is empty (shape {array.shape}): there is no memory to "
                             f"page-lock")
        low, high = byte_bounds(array)
        start, nbytes, owner = host_buffer(array)
        try:
            registry = get_backend(device.backend).host_registry
            pin = registry.pin(low, high - low, owner, block=(start, nbytes), read_only=read_only,
                               writes=not read_only, what="register_host(array)")
        except HostRegistrationError as exc:
            hint = ("" if read_only else "; if the memory is read-only (a read-only memory map), pass read_only=True")
            raise ValueError(f"register_host(array): the driver refused to page-lock the array's memory ({exc}){hint}; "
                             f"else copy the data into an array of dev.pinned(shape, dtype)") from None
        self.array, self.device, self.read_only = array, device, read_only
        self._pin = pin  # (None: page-locked by other means, such as Device.pinned, which stays so)
        self._released = False

    @property
    def released(self) -> bool:
        """Whether ``release`` was called."""
        return self._released

    def release(self) -> None:
        """End this registration: the memory becomes pageable again once no other registration or copy node uses it
        (a second call raises).

        Raises:
            ValueError: If it was released already.

        See also: hipHostUnregister / cudaHostUnregister.
        """
        if self._released:
            raise ValueError(f"{self!r}: released already (each registration is released once)")
        self._released = True
        if self._pin is not None:
            self._pin.release()

    @property
    def device_array(self) -> Array:
        """The registered memory as an Array of ``device``, for kernels to read and write in place over the bus
        (zero-copy; read only, where registered ``read_only``); the array must be C-contiguous. The Array holds the
        memory page-locked as long as it lives, whether this registration is released or not.

        Raises:
            ValueError: If released, or if the array is not C-contiguous.

        See also: hipHostGetDevicePointer / cudaHostGetDevicePointer.
        """
        if self._released:
            raise ValueError(f"device_array: {self!r} is released; register the array again to use it on the device")
        array = self.array
        if not array.flags.c_contiguous:
            raise ValueError(f"device_array: the array is not C-contiguous (strides {array.strides}); an Array is, so "
                             f"register a contiguous array (np.ascontiguousarray copies one)")
        device = self.device
        start, nbytes, owner = host_buffer(array)
        # (A use of its own: None where the memory is page-locked by other means, which keep it so themselves.)
        backend = get_backend(device.backend)
        pin = backend.host_registry.pin(array.__array_interface__["data"][0], array.nbytes, owner,
                                        block=(start, nbytes), read_only=self.read_only, writes=not self.read_only,
                                        what="device_array")
        alloc = backend.mem_host_mapped(device.index, array, pin)
        return Array(device, alloc.ptr, array.shape, array.dtype, alloc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._released:
            self.release()

    def __repr__(self) -> str:
        state = ", released" if self._released else ""
        return (f"HostRegistration({self.array.nbytes} bytes at {self.array.__array_interface__['data'][0]:#x}, "
                f"{self.device}{', read-only' if self.read_only else ''}{state})")
