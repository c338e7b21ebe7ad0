"""Other libraries' streams and arrays in gpugraph: the CUDA stream protocol (``__cuda_stream__``), DLPack
and the CUDA Array Interface (``__cuda_array_interface__``, version 3).

This module owns the import rules of ``Stream.from_external``, ``gg.from_dlpack`` and
``gg.from_cuda_array_interface``; reading and viewing other libraries' arrays (those given to kernels
included) is gpugraph._foreign_arrays', the registry of CUDA streams by native handle is gpugraph._stream's,
and the exports are ``Array.__dlpack__`` / ``__cuda_array_interface__`` and ``Stream.__cuda_stream__``.
Which protocols apply is the backend's fact (``Backend.speaks_cuda``, ``Backend.dlpack_device_type``).

Imports view memory, never copy it. An imported Array is C-contiguous, writable memory of the device it
is used on; it keeps the producer alive (a DLPack import calls the producer's deleter) as long as the
Array lives. The checks of a description (layout, dtype, read-only) come before the device checks, so
a malformed object gets the same error on every backend.
"""

from __future__ import annotations

import weakref
from typing import Any

from . import _dlpack, _stream
from ._device import Device
from ._errors import BackendUnavailableError
from ._foreign_arrays import (
    check_same_memory,
    dlpack_device,
    import_capsule,
    keep,
    name_of,
    need_cuda,
    read_interface,
    view_memory,
)
from ._memory import Array, allocation_of
from ._scalars import as_bool, describe
from ._stream import Stream
from .backends import BACKEND_ORDER, get_backend

_LEGACY_HANDLES = (0, 1)  # the default stream as the protocols give it, and CU_STREAM_LEGACY
_PER_THREAD_HANDLE = 2  # CU_STREAM_PER_THREAD


def _device(device: object, what: str) -> Device:
    if device is None:
        return Device()
    if type(device) is not Device:
        raise TypeError(f"{what}(device): expected a Device or None, got {name_of(device)}")
    return device


def _check_stream(stream: object, device: Device, what: str) -> Stream | None:
    if stream is None:
        return None
    if type(stream) is not Stream:
        raise TypeError(f"{what}(stream): expected a gpugraph Stream or None, got {name_of(stream)}"
                        + (" (wrap it with gg.Stream.from_external first)" if hasattr(stream, "__cuda_stream__")
                           else ""))
    if stream.device is not device:
        raise ValueError(f"{what}: the stream is on {stream.device}, the memory is viewed on {device}")
    return stream


# Streams


def _stream_address(obj: Any, what: str) -> int:
    """The native handle an object gives through the CUDA stream protocol (version 0)."""
    method = getattr(obj, "__cuda_stream__", None)
    if method is None:
        raise TypeError(f"{what}: expected a gpugraph Stream or an object with __cuda_stream__ (the CUDA stream "
                        f"protocol: CuPy, PyTorch, cuda.core streams), got {name_of(obj)}")
    result = method()
    if (not isinstance(result, tuple) or len(result) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in result)):
        raise ValueError(f"{what}: {name_of(obj)}.__cuda_stream__() must return (version, handle) as two ints, "
                         f"got {result!r}")
    version, address = result
    if version != 0:
        raise ValueError(f"{what}: {name_of(obj)} speaks version {version} of the CUDA stream protocol; "
                         f"gpugraph understands version 0")
    if address < 0:
        raise ValueError(f"{what}: {name_of(obj)}.__cuda_stream__() gave the handle {address}, not an address")
    return address


def external_stream(obj: Any, device: Device | None = None) -> Stream:
    """``Stream.from_external``: the Stream of a stream another library made (see there)."""
    what = "Stream.from_external"
    if type(obj) is Stream:
        if device is not None and obj.device is not device:
            raise ValueError(f"{what}: {obj!r} is on {obj.device}, not {device}")
        return obj
    address = _stream_address(obj, what)
    device = _device(device, what)
    if not get_backend(device.backend).speaks_cuda:
        raise ValueError(f"{what}: {name_of(obj)} is a CUDA stream (__cuda_stream__) and {device} is not a CUDA "
                         f"device; use a cuda device")
    return _stream_at(device, address, obj, what)


def _stream_at(device: Device, address: int, owner: object, what: str) -> Stream:
    """The Stream of native handle ``address`` on ``device``, made (keeping ``owner`` alive) if there is none."""
    if address in _LEGACY_HANDLES:
        return device.default_stream
    if address == _PER_THREAD_HANDLE:
        raise ValueError(f"{what}: handle 2 is CUDA's per-thread default stream, which gpugraph does not "
                         f"model; use a stream of its own (dev.stream()) or the legacy default stream")
    with _stream.by_address_lock:
        stream = _stream.by_address.get(address)
    if stream is None:
        try:
            handle, index, non_blocking, priority = get_backend(device.backend).stream_external(device.index, address)
        except ValueError as exc:  # the driver does not know the handle
            raise ValueError(f"{what}: {exc}") from None
        if index != device.index:
            raise ValueError(f"{what}: the stream {address:#x} belongs to {device.backend}:{index}, not {device}")
        made = Stream(device, non_blocking, priority, _wrap=handle)
        weakref.finalize(made, keep, owner).atexit = False  # the owner's stream lives as long as the Stream
        with _stream.by_address_lock:
            stream = _stream.by_address.setdefault(address, made)
    if stream.device is not device:
        raise ValueError(f"{what}: the stream {address:#x} belongs to {stream.device}, not {device}")
    return stream


# Arrays

def _same_allocation(x: Array) -> Array:
    """A gpugraph Array imported again: an Array on its allocation record (the same address, lifetime checks
    and frees: importing through the backend would make CPU stream and graph memory escape its lifetime
    checks), keeping ``x`` alive (its collection frees ``Device.empty`` memory)."""
    array = Array(x.device, x.ptr, x.shape, x.dtype, allocation_of(x))
    weakref.finalize(array, keep, x).atexit = False
    return array


def from_dlpack(x: Any, *, device: Device | None = None, stream: Stream | None = None,
                copy: bool | None = None) -> Array:
    """View another library's array (anything with ``__dlpack__`` and ``__dlpack_device__``) as an Array.

    The array API standard's ``from_dlpack``: the Array shares the producer's memory and keeps it alive
    (the producer's deleter runs when the Array is collected). A gpugraph Array gives an Array on the same
    allocation (the same address; frees, and the lifetime checks of stream and graph memory, apply to
    both). The lifetime checks stop at gpugraph's own objects: a NumPy view of stream or graph memory
    (``numpy.from_dlpack`` on the CPU backend) is not checked, so using it outside the allocation's
    lifetime reads or writes memory that is no longer the allocation's.

    Args:
        x: The producer's array: a CuPy array or PyTorch tensor on a GPU, NumPy or any host array on the
            CPU backend, another gpugraph Array.
        device: The Device to view it on; None means the device ``x`` is on (its ``__dlpack_device__``:
            of the backend whose memory has that DLPack type; host memory is the CPU backend's ``cpu:0``).
            A device whose memory ``x`` is not in is refused: there is no copy across devices (copy host
            data with ``dev.asarray``).
        stream: The gpugraph Stream the Array will be used on: the producer orders its pending work
            before that stream (DLPack's ``stream``). None: the producer orders it before the legacy
            default stream, which non-blocking streams do not wait for. Ignored for host memory.
        copy: Passed to the producer: True asks it for a copy of its own (which the Array then views),
            False forbids one, None lets it choose.

    Raises:
        TypeError: If ``x`` does not support DLPack, or an argument has the wrong type.
        ValueError: If ``x`` is not in ``device``'s memory, ``stream`` is on another device, or ``device``
            is None and no backend here uses ``x``'s memory (the message says which are unavailable, and why).
        BufferError: If the memory is strided, read-only (DLPack's READ_ONLY flag; gpugraph writes through
            any Array), of a type NumPy has no dtype for, or of an unknown DLPack version.
        BackendUnavailableError: If ``device`` is None and ``x``'s device index is not a device here.
    """
    what = "from_dlpack"
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"{what}: {name_of(x)} does not support DLPack (it has no __dlpack__ and "
                        f"__dlpack_device__)")
    if copy is not None and as_bool(copy) is None:
        raise TypeError(f"{what}(copy): expected True, False or None, got {describe(copy)}")
    copy = None if copy is None else bool(copy)
    source = dlpack_device(x, what)
    device = _device(_device_of_memory(x, source, what) if device is None else device, what)
    check_same_memory(x, source, device, what)
    stream = _check_stream(stream, device, what)
    if type(x) is Array and not copy:
        return _same_allocation(x)
    producer_stream = None if source[0] == _dlpack.CPU or stream is None else stream.ptr
    return import_capsule(x, device, producer_stream, copy, what)


def _device_of_memory(x: Any, source: tuple[int, int], what: str) -> Any:
    """The Device whose memory is DLPack device ``source``: of the backend whose ``dlpack_device_type`` it
    is. Backends are tried cheapest first (the CPU backend is always loaded), so that viewing host memory
    never starts a GPU backend; no two backends use memory of one DLPack type."""
    kind, index = source
    known = []
    for name in reversed(BACKEND_ORDER):
        try:
            backend = get_backend(name)
        except BackendUnavailableError as exc:
            known.append(str(exc).splitlines()[0])
            continue
        if backend.dlpack_device_type == kind:
            return Device(f"{name}:{index}")
        known.append(f"{name} uses {_dlpack.type_name(backend.dlpack_device_type)} memory")
    raise ValueError(f"{what}: {name_of(x)} is in {_dlpack.describe(source)} memory, which no gpugraph backend "
                     f"uses here ({'; '.join(known)})")


def from_cuda_array_interface(x: Any, *, device: Device | None = None, stream: Stream | None = None) -> Array:
    """View another library's CUDA array (anything with ``__cuda_array_interface__``) as an Array.

    The Array shares the memory and keeps ``x`` alive as long as it lives; a gpugraph Array gives an
    Array on the same allocation, as with ``from_dlpack``. Version 3's ``stream`` is honoured: when ``x``
    names the stream its pending work is on, the consumer's stream waits for that work (an event, no host
    synchronization).

    Args:
        x: A CuPy array, PyTorch CUDA tensor, Numba device array...
        device: The CUDA Device the memory is on; None means ``Device()``. The driver is asked where the
            memory lives, so memory of another device is refused.
        stream: The gpugraph Stream the Array will be used on, which is made to wait for ``x``'s stream;
            None: the legacy default stream waits (as DLPack's None).

    Raises:
        TypeError: If ``x`` has no ``__cuda_array_interface__`` (a NumPy array, say), or an argument has
            the wrong type.
        BufferError: If the memory is strided, read-only, masked or of a non-numeric dtype.
        ValueError: If the description is malformed, ``device`` is not a CUDA device, or the memory is not
            device memory of ``device``.
    """
    what = "from_cuda_array_interface"
    interface = read_interface(x, what)
    device = _device(device, what)
    need_cuda(x, device, what)
    consumer = _check_stream(stream, device, what)
    if type(x) is Array:
        if x.device is not device:
            raise ValueError(f"{what}: {x!r} is memory of {x.device}, not of {device}")
        return _same_allocation(x)
    array = view_memory(device, interface.ptr, interface.shape, interface.dtype, what)
    weakref.finalize(array, keep, x).atexit = False
    if interface.stream is not None:
        consumer = consumer if consumer is not None else device.default_stream
        if interface.stream != consumer.ptr:
            producer = _stream_at(device, interface.stream, None, what)
            consumer.wait(producer.record())
    return array


_stream.external_stream = external_stream  # (Stream.from_external: see gpugraph._stream)
