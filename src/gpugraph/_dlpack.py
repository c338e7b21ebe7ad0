"""DLPack capsules: export of an Array (``Array.__dlpack__``) and reading of other libraries' capsules
(``gg.from_dlpack``, in ``gpugraph._interop``).

No well-kept library builds a capsule around a raw device pointer, so the few structs of the DLPack
specification (dlpack.h: ``DLManagedTensor`` and, from DLPack 1.0, ``DLManagedTensorVersioned``) are
declared here with ctypes. The Python side follows the array API standard's ``__dlpack__``: a consumer
passing ``max_version >= (1, 0)`` gets a versioned capsule ("dltensor_versioned"), any other a legacy one
("dltensor"); a consumer renames the capsule it uses ("used_...") and calls its deleter when done.
"""

from __future__ import annotations

import ctypes
import operator
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import numpy as np

from ._capture_rules import synchronize_device
from ._device_like import DeviceLike
from ._scalars import as_bool
from ._scalars import describe as describe_value
from .backends import get_backend

CPU = 1  # kDLCPU: host memory (each backend names its own type: Backend.dlpack_device_type)
_DEVICE_NAMES = {1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
                 9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 13: "kDLCUDAManaged", 14: "kDLOneAPI"}
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_KINDS = {code: kind for kind, code in _CODES.items()}
VERSION = (1, 0)  # the DLPack version of the versioned capsules made here
READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED = 1, 2, 4  # DLPACK_FLAG_BITMASK_*


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


# The deleters are kept as plain addresses: a foreign one is called with the GIL held (PYFUNCTYPE), since
# some producers touch Python objects in it without taking the GIL themselves.
class _ManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _ManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


_NAMES = {False: b"dltensor", True: b"dltensor_versioned"}  # by "versioned"
_USED = {False: b"used_dltensor", True: b"used_dltensor_versioned"}
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CALL_DELETER = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Exported tensors by the address of their managed struct: what keeps the exported object and the structs
# alive until the consumer (or the capsule, if never consumed) calls the deleter.
_alive: dict[int, tuple[Any, ...]] = {}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _delete(managed: int) -> None:
    _alive.pop(managed, None)


_DELETE_ADDRESS = ctypes.cast(_delete, ctypes.c_void_p).value


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule: int) -> None:
    # Only an unconsumed capsule still carries its first name; a consumer renames it and calls the deleter.
    obj = ctypes.cast(capsule, ctypes.py_object)
    for name in _NAMES.values():
        if _capsule_is_valid(obj, name):
            _alive.pop(_capsule_pointer(obj, name), None)


def type_name(kind: int) -> str:
    """A DLPack device type in words, e.g. ``kDLCUDA``."""
    return _DEVICE_NAMES.get(kind, f"DLPack device type {kind}")


def describe(device: tuple[int, int]) -> str:
    """A DLPack device in words, e.g. ``kDLCUDA:0``."""
    kind, index = device
    return f"{type_name(kind)}:{index}"


def device_tuple(device: DeviceLike) -> tuple[int, int]:
    """``__dlpack_device__`` of an Array of ``device``: (DLPack device type, device index)."""
    return get_backend(device.backend).dlpack_device_type, device.index


# Export

class Exported(Protocol):
    """What an export reads of an Array (``gpugraph._memory.Array``, which sits above this module)."""

    device: Any  # its Device (DeviceLike's, and Device.empty for a copy)
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int

    def to_numpy(self) -> np.ndarray: ...


def export(array: Exported, *, stream: object = None, max_version: Any = None, dl_device: Any = None,
           copy: Any = None) -> Any:
    """``Array.__dlpack__``: a capsule viewing ``array``'s memory (or a copy of it, see below).

    Follows the array API standard: ``max_version >= (1, 0)`` gives a versioned capsule (its READ_ONLY
    flag clear: an Array is writable), any other a legacy one. ``stream`` must be None for CPU memory;
    for GPU memory an int (-1, 1, 2 or a stream handle), which gpugraph does not act on: the export
    adds no synchronization. ``dl_device`` may name the Array's own device or, with ``copy`` not False,
    the host (``(1, 0)``: a host copy, made after the device finished its work); ``copy=True`` exports a
    new copy on the same device. Copies set the IS_COPIED flag.

    Raises:
        BufferError: If the dtype has no DLPack type, ``dl_device`` is a device gpugraph cannot export
            to, or ``copy=False`` while ``dl_device`` needs a copy.
        ValueError: If ``stream`` is not None for CPU memory, or is 0 or below -1.
        TypeError: If an argument has the wrong type.
    """
    what = "__dlpack__"
    dtype = np.dtype(array.dtype)
    if dtype.kind not in _CODES or not dtype.isnative:
        raise BufferError(f"{what}: DLPack has no type for {dtype} (of {array!r})")
    versioned = _versioned(max_version, what)
    own = device_tuple(array.device)
    target = own if dl_device is None else _device_arg(dl_device, f"{what}(dl_device)")
    if copy is not None and as_bool(copy) is None:
        raise TypeError(f"{what}(copy): expected True, False or None, got {describe_value(copy)}")
    copy = None if copy is None else bool(copy)
    check_stream(stream, target[0], what)
    if target != own:
        if target != (CPU, 0):
            host = " or, copied, to the host (kDLCPU:0)" if own[0] != CPU else ""
            raise BufferError(f"{what}: {array!r} is in {describe(own)} memory and can be exported there{host}; "
                              f"dl_device asked for {describe(target)}")
        if copy is False:
            raise BufferError(f"{what}: exporting {array!r} to the host (dl_device {describe(target)}) needs a "
                              f"copy, and copy=False forbids it")
        copied = array.to_numpy()
        return _capsule(copied, copied.ctypes.data, copied.shape, dtype, target, versioned, IS_COPIED)
    if copy:
        device = array.device
        duplicate = device.empty(array.shape, dtype)
        synchronize_device(device, f"{what}(copy=True)")
        get_backend(device.backend).copy(duplicate, array, array.nbytes)
        array = duplicate
    # The export keeps the Array and whatever the backend says keeps its memory valid (the CPU backend's
    # pool memory, which a free and a trim would otherwise unmap under the consumer's view).
    address, memory = get_backend(array.device.backend).export_memory(array)
    return _capsule((array, memory), address, array.shape, dtype, own, versioned, IS_COPIED if copy else 0)


def _versioned(max_version: Any, what: str) -> bool:
    """Whether the consumer's ``max_version`` asks for a versioned capsule (DLPack 1.0 or later)."""
    if max_version is None:
        return False
    try:
        major, _minor = (operator.index(v) for v in max_version)
    except (TypeError, ValueError):
        raise TypeError(f"{what}(max_version): expected None or a (major, minor) tuple of ints, "
                        f"got {max_version!r}") from None
    return major >= 1


def _device_arg(value: Any, what: str) -> tuple[int, int]:
    try:
        kind, index = (operator.index(v) for v in value)
    except (TypeError, ValueError):
        raise TypeError(f"{what}: expected a (device type, device index) tuple of ints such as (1, 0), "
                        f"got {value!r}") from None
    return kind, index


def check_stream(stream: object, device_type: int, what: str) -> None:
    """The DLPack rule for ``__dlpack__(stream=...)``: only None for CPU memory; for GPU memory None or an
    int: -1 (no synchronization), 1 or 2 (legacy / per-thread default stream) or a stream handle (0 is
    ambiguous, so refused)."""
    if stream is None:
        return
    if device_type == CPU:
        raise ValueError(f"{what}: stream must be None for CPU memory (it has no streams), got {stream!r}")
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"{what}(stream): expected None or an int stream handle, got {type(stream).__name__}")
    if stream == 0 or stream < -1:
        raise ValueError(f"{what}(stream): expected -1, 1, 2 or a stream handle, got {stream} (0 is ambiguous)")


def _capsule(owner: object, data_ptr: int, shape: tuple[int, ...], dtype: np.dtype, device: tuple[int, int],
             versioned: bool, flags: int) -> Any:
    """A capsule around C-contiguous memory at ``data_ptr``; it keeps ``owner`` alive until deleted."""
    ndim = len(shape)
    dims = (ctypes.c_int64 * max(ndim, 1))(*shape)
    strides = (ctypes.c_int64 * max(ndim, 1))(*_c_strides(shape))
    managed: Any = _ManagedTensorVersioned() if versioned else _ManagedTensor()
    tensor = managed.dl_tensor
    tensor.data = data_ptr
    tensor.device = _Device(*device)
    tensor.ndim = ndim
    tensor.dtype = _DataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)
    tensor.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    # Explicit strides (in elements): DLPack 1.2 lets consumers rely on them whenever ndim > 0.
    tensor.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if ndim else None
    tensor.byte_offset = 0
    managed.deleter = _DELETE_ADDRESS
    if versioned:
        managed.version = _Version(*VERSION)
        managed.flags = flags  # READ_ONLY stays clear: the memory is writable
    address = ctypes.addressof(managed)
    _alive[address] = (owner, managed, dims, strides)
    return _new_capsule(address, _NAMES[versioned], _destroy_capsule)


def _c_strides(shape: tuple[int, ...]) -> list[int]:
    """C-contiguous strides of ``shape``, in elements."""
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return strides[::-1]


def c_contiguous(shape: tuple[int, ...], strides: Any, unit: int) -> bool:
    """Whether ``strides`` (in multiples of ``unit``; None means C-contiguous) lay ``shape`` out C-contiguously.

    Strides of dimensions of extent 1 do not matter, nor any stride of an empty array.
    """
    if strides is None or 0 in shape:
        return True
    expected = unit
    for extent, stride in zip(reversed(shape), reversed(tuple(strides))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


# Import

class Tensor(NamedTuple):
    """What a DLPack capsule describes (read by ``read``; nothing is taken from the capsule yet)."""

    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    device: tuple[int, int]
    read_only: bool
    versioned: bool
    managed: int  # address of the managed struct
    deleter: int | None  # address of its deleter


def read(capsule: Any, what: str, name: str) -> Tensor:
    """Read an unused DLPack capsule (from ``name``, for messages) describing C-contiguous memory of a
    NumPy-expressible dtype.

    Raises:
        TypeError: If ``capsule`` is not an unused DLPack capsule.
        BufferError: If the tensor is strided, of a type NumPy has no dtype for, or of an unknown DLPack
            major version.
    """
    for versioned in (True, False):
        if _capsule_is_valid(capsule, _NAMES[versioned]):
            break
    else:
        raise TypeError(f"{what}: {name}.__dlpack__ returned {capsule!r}, not an unused DLPack capsule "
                        f"('dltensor' or 'dltensor_versioned')")
    address = _capsule_pointer(capsule, _NAMES[versioned])
    read_only = False
    if versioned:
        managed: Any = _ManagedTensorVersioned.from_address(address)
        if managed.version.major != 1:
            raise BufferError(f"{what}: {name} gave a DLPack {managed.version.major}.{managed.version.minor} "
                              f"capsule; gpugraph reads DLPack 1.x")
        read_only = bool(managed.flags & READ_ONLY)
        if managed.flags & IS_SUBBYTE_TYPE_PADDED:
            raise BufferError(f"{what}: {name} holds a padded sub-byte type, which NumPy cannot express")
    else:
        managed = _ManagedTensor.from_address(address)
    tensor = managed.dl_tensor
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    dtype = _dtype(tensor.dtype, f"{what}: {name} holds")
    strides = tuple(tensor.strides[i] for i in range(tensor.ndim)) if tensor.strides else None
    if not c_contiguous(shape, strides, 1):
        raise BufferError(f"{what}: {name} is not C-contiguous (shape {shape}, strides {strides} elements); an "
                          f"Array is C-contiguous: make a contiguous copy first")
    return Tensor((tensor.data or 0) + tensor.byte_offset, shape, dtype,
                  (tensor.device.device_type, tensor.device.device_id), read_only, versioned, address,
                  managed.deleter)


_BITS = {"i": (8, 16, 32, 64), "u": (8, 16, 32, 64), "f": (16, 32, 64), "c": (64, 128), "b": (8,)}


def _dtype(kind: Any, what: str) -> np.dtype:
    code, bits, lanes = kind.code, kind.bits, kind.lanes
    letter = _KINDS.get(code)
    if letter is None or lanes != 1 or bits not in _BITS[letter]:
        raise BufferError(f"{what} DLPack type (code {code}, {bits} bits, {lanes} lanes), which has no NumPy dtype")
    return np.dtype("?" if letter == "b" else f"{letter}{bits // 8}")


def consume(capsule: Any, tensor: Tensor) -> Callable[[], None]:
    """Mark ``capsule`` used (so that it no longer frees the tensor) and return what releases the tensor
    (its deleter), to be called once, when the memory is no longer used."""
    if _capsule_set_name(capsule, _USED[tensor.versioned]):  # pragma: no cover - CPython fails only on OOM
        raise MemoryError("PyCapsule_SetName failed")
    return lambda: _release(tensor.deleter, tensor.managed)


def _release(deleter: int | None, managed: int) -> None:
    if deleter:
        _CALL_DELETER(deleter)(managed)
