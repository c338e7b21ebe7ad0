"""Other libraries' device arrays read as Arrays: DLPack capsules and ``__cuda_array_interface__`` (version 3)
descriptions checked and viewed, and such an array given for a kernel's pointer parameter (``kernel_argument``).

Below kernels (gpugraph._kernel_args views an argument through ``kernel_argument``) and gpugraph._interop (the import
rules of ``gg.from_dlpack`` and ``gg.from_cuda_array_interface``), which both import it. A view never copies: the
Array shares the producer's memory and keeps the producer alive as long as it lives.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _dlpack
from ._device_like import DeviceLike
from ._memory import Array, normalize_dtype
from .backends import get_backend


def name_of(obj: Any) -> str:
    return type(obj).__name__


def view_memory(device: DeviceLike, ptr: int, shape: tuple[int, ...], dtype: np.dtype, what: str) -> Array:
    """An Array viewing memory that gpugraph did not allocate (the backend checks it is the device's)."""
    nbytes = Array.bytes_for(shape, dtype)
    try:
        alloc = get_backend(device.backend).mem_import(device.index, ptr, nbytes)
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None
    return Array(device, ptr, shape, dtype, alloc)


def keep(_owner: Any) -> None:
    """A finalizer holding the producer of a view until the view is collected."""


def _plain_dtype(typestr: Any, source: str, what: str) -> np.dtype:
    try:
        result = normalize_dtype(typestr) if isinstance(typestr, str) else None
    except TypeError:
        result = None
    if result is None or result.kind not in "biufc" or not result.isnative:
        raise BufferError(f"{what}: {source} has 'typestr' {typestr!r}; an Array holds native-endian numbers")
    return result


def dlpack_device(x: Any, what: str) -> tuple[int, int]:
    found = x.__dlpack_device__()
    try:
        kind, index = (int(v) for v in found)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {name_of(x)}.__dlpack_device__() must return (device type, index), "
                         f"got {found!r}") from None
    return kind, index


def check_same_memory(x: Any, source: tuple[int, int], device: DeviceLike, what: str, verb: str = "viewed on") -> None:
    own = _dlpack.device_tuple(device)
    if source != own:
        hint = " (copy host data with dev.asarray instead)" if source[0] == _dlpack.CPU else ""
        raise ValueError(f"{what}: {name_of(x)} is in {_dlpack.describe(source)} memory and cannot be {verb} "
                         f"{device}, whose memory is {_dlpack.describe(own)}{hint}")


def import_capsule(x: Any, device: DeviceLike, producer_stream: int | None, copy: bool | None, what: str) -> Array:
    """Ask ``x`` for a capsule (a versioned one first, as the array API standard says), view its memory,
    and hand the capsule's deleter to the Array. A refused capsule stays unused: it frees itself."""
    kwargs: dict[str, Any] = {"stream": producer_stream, "max_version": _dlpack.VERSION}
    if copy is not None:
        kwargs["copy"] = copy
    try:
        capsule = x.__dlpack__(**kwargs)
    except TypeError:
        if copy:  # a producer without max_version (DLPack before 1.0) knows no copy either
            raise BufferError(f"{what}: {name_of(x)}.__dlpack__ takes no copy= (a DLPack producer before 1.0), "
                              f"so it cannot be asked for a copy") from None
        capsule = x.__dlpack__(stream=producer_stream)
    tensor = _dlpack.read(capsule, what, name_of(x))
    if tensor.device != _dlpack.device_tuple(device):
        raise ValueError(f"{what}: {name_of(x)}'s capsule is in {_dlpack.describe(tensor.device)} memory, not "
                         f"{device}'s")
    if tensor.read_only:
        raise BufferError(f"{what}: {name_of(x)} exported read-only memory (DLPack's READ_ONLY flag); an Array "
                          f"is written by kernels and copies, so gpugraph views only writable memory")
    array = view_memory(device, tensor.ptr, tensor.shape, tensor.dtype, what)
    release = _dlpack.consume(capsule, tensor)
    weakref.finalize(array, release).atexit = False  # the producer may be gone at interpreter exit
    return array


class Interface:
    """A parsed ``__cuda_array_interface__``."""

    __slots__ = ("dtype", "ptr", "shape", "stream")

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype, stream: int | None) -> None:
        self.ptr, self.shape, self.dtype, self.stream = ptr, shape, dtype, stream


def read_interface(x: Any, what: str, desc: Any = None) -> Interface:
    """Read and check ``x.__cuda_array_interface__`` (versions 0 to 3; ``desc`` if already read) as an
    Array's description."""
    if desc is None:
        try:
            desc = x.__cuda_array_interface__
        except AttributeError:
            raise TypeError(f"{what}: {name_of(x)} has no __cuda_array_interface__ (it is not CUDA memory); copy "
                            f"host data with dev.asarray") from None
    source = f"{name_of(x)}'s __cuda_array_interface__"
    if not isinstance(desc, Mapping):
        raise TypeError(f"{what}: {source} must be a dict, got {name_of(desc)}")
    version, shape, data = desc.get("version"), desc.get("shape"), desc.get("data")
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValueError(f"{what}: {source} has no valid 'version' (got {version!r})")
    if (not isinstance(shape, tuple) or
            not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
        raise ValueError(f"{what}: {source} 'shape' must be a tuple of non-negative ints, got {shape!r}")
    if not isinstance(data, tuple) or len(data) != 2 or not isinstance(data[0], int) or data[0] < 0:
        raise ValueError(f"{what}: {source} 'data' must be (pointer, read_only), got {data!r}")
    dtype = _plain_dtype(desc.get("typestr"), source, what)
    if data[1]:
        raise BufferError(f"{what}: {name_of(x)} is read-only ('data' read-only flag); an Array is written by "
                          f"kernels and copies, so gpugraph views only writable memory")
    if desc.get("mask") is not None:
        raise BufferError(f"{what}: {name_of(x)} is a masked array ('mask'); an Array has no mask")
    strides = desc.get("strides")
    if not _dlpack.c_contiguous(shape, strides, dtype.itemsize):
        raise BufferError(f"{what}: {name_of(x)} is not C-contiguous (shape {shape}, strides {strides} bytes); an "
                          f"Array is C-contiguous: make a contiguous copy first")
    stream = desc.get("stream") if version >= 3 else None
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int) or stream <= 0):
        raise ValueError(f"{what}: {source} 'stream' must be None or a stream handle (a positive int), "
                         f"got {stream!r}")
    return Interface(data[0], shape, dtype, stream)


def need_cuda(x: Any, device: DeviceLike, what: str) -> None:
    if not get_backend(device.backend).speaks_cuda:
        raise ValueError(f"{what}: {name_of(x)} is CUDA memory (__cuda_array_interface__) and {device} is not a "
                         f"CUDA device")


def kernel_argument(value: Any, device: DeviceLike, where: str) -> Array | None:
    """Another library's device array given for a kernel's pointer parameter, viewed as an Array; None when
    ``value`` is no such array (host memory included: kernels take device memory only, on every backend).

    Memory with ``__cuda_array_interface__`` is used first, then DLPack. Nothing is synchronized: as with
    gpugraph's own Arrays, the producer's work on the memory must be ordered before the launch (the same
    stream, via ``Stream.from_external``, or an event); ``gg.from_dlpack(x, stream=s)`` imports once with
    the producer ordering it.
    """
    try:
        desc = value.__cuda_array_interface__
    except AttributeError:
        desc = None
    if desc is not None:
        interface = read_interface(value, where, desc)
        need_cuda(value, device, where)
        array = view_memory(device, interface.ptr, interface.shape, interface.dtype, where)
        weakref.finalize(array, keep, value).atexit = False
        return array
    if not hasattr(value, "__dlpack__") or not hasattr(value, "__dlpack_device__"):
        return None
    source = dlpack_device(value, where)
    if source[0] == _dlpack.CPU:
        return None
    check_same_memory(value, source, device, where, "used by a launch on")
    return import_capsule(value, device, -1, None, where)  # -1: the producer must not synchronize
