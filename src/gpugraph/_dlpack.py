"""DLPack export of an Array (``__dlpack__``), for ``torch.from_dlpack``, ``cupy.from_dlpack`` and friends.

No well-kept library builds a capsule around a raw device pointer, so the few structs of the DLPack
specification (dlpack.h, v0.8 "DLManagedTensor") are declared here with ctypes.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

DEVICE_TYPES = {"cpu": 1, "cuda": 2, "hip": 10}  # kDLCPU, kDLCUDA, kDLROCM
_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _ManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_ManagedTensor))
_ManagedTensor._fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_NAME = b"dltensor"

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DESTRUCTOR]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Exported tensors by the address of their DLManagedTensor: what keeps the Array and the structs alive
# until the consumer (or the capsule, if never consumed) calls the deleter.
_alive: dict[int, tuple[Any, ...]] = {}


@_DELETER
def _delete(managed: Any) -> None:
    _alive.pop(ctypes.addressof(managed.contents), None)


@_CAPSULE_DESTRUCTOR
def _destroy_capsule(capsule: int) -> None:
    # Only an unconsumed capsule still carries the name "dltensor"; a consumer renames it and deletes.
    obj = ctypes.cast(capsule, ctypes.py_object)
    if _capsule_is_valid(obj, _NAME):
        _alive.pop(_capsule_pointer(obj, _NAME), None)


def device_tuple(array: Any) -> tuple[int, int]:
    """``__dlpack_device__``: (DLPack device type, device index)."""
    return DEVICE_TYPES[array.device.backend], array.device.index


def export(array: Any, data_ptr: int) -> Any:
    """A DLPack capsule viewing ``array``'s memory at ``data_ptr``; it keeps ``array`` alive."""
    dtype = np.dtype(array.dtype)
    if dtype.kind not in _CODES:
        raise TypeError(f"__dlpack__: DLPack has no type for {dtype}")
    shape = (ctypes.c_int64 * max(len(array.shape), 1))(*array.shape)
    managed = _ManagedTensor()
    tensor = managed.dl_tensor
    tensor.data = data_ptr
    tensor.device = _Device(*device_tuple(array))
    tensor.ndim = len(array.shape)
    tensor.dtype = _DataType(_CODES[dtype.kind], dtype.itemsize * 8, 1)
    tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = None  # C-contiguous
    tensor.byte_offset = 0
    managed.deleter = _delete
    address = ctypes.addressof(managed)
    _alive[address] = (array, managed, shape)
    return _new_capsule(address, _NAME, _destroy_capsule)
