"""Kernel arguments in their 8-byte slots: how each value a kernel parameter takes is written into its slot, the one
packer of every backend's stream launches, kernel nodes, node setters and Param patches.

A kernel's arguments sit in 8-byte slots, one per parameter (``kernelParams`` points at each). A slot's code says
what it holds: ``P`` a pointer (an address), else NumPy's character code of a C number type (``? b B h H i I q Q e
f d``). ``Slots.put`` writes one value into its slot if it is one the slot takes as it is, a number of the slot's own
type, in range; anything else is declined (False, the slot unchanged), and the caller converts or explains it
(``gpugraph._kernel``'s converters make every value a slot takes). Half and float NumPy scalars are written as their
own bytes (a conversion through a double would quiet a signalling NaN).

A core module (``gpugraph._core``): compiled where gpugraph was built with Cython, the writes are C stores; plain,
``struct``'s. Both write the slots little-endian, as every platform gpugraph runs on stores them.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ._memory import Array

if TYPE_CHECKING:
    from ._signature import KernelParam

try:
    import cython  # (the Cython compiler reads this exact import)
except ModuleNotFoundError:  # plain, without Cython installed
    from . import _cython as cython

if cython.compiled:
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.libc.string import memcpy, memset

SLOT = 8  # the bytes of every slot
SCALAR_CODES = "?bBhHiIqQefd"
DTYPES = {code: np.dtype(code) for code in SCALAR_CODES}  # each scalar code's dtype
_SIZES = {code: DTYPES[code].itemsize for code in SCALAR_CODES}
# Plain mode's store of each code: the value, then zeros to the end of its slot.
_STRUCTS = {code: struct.Struct(f"<{code}{SLOT - size}x" if size < SLOT else f"<{code}")
            for code, size in _SIZES.items() if code != "P"}
# NumPy scalar type -> its slot's code (filled as scalars are met: int64 and longlong are two types of one code).
_SCALAR_TYPES: dict[type, int] = {}
_SCALAR_TYPES_KEPT = 64
# The largest finite half and float, as Python numbers: an int compares with them exactly.
_HALF_MAX, _FLOAT_MAX, _DOUBLE_MAX = 65504, float(np.finfo(np.float32).max), float(np.finfo(np.float64).max)


def code_of(dtype: np.dtype | None, pointer: bool) -> str:
    """The code of a parameter's slot: ``P`` for a pointer (or where ``dtype`` is None: an Array's address), else the
    character code of the C number type ``dtype`` is (a dtype of another code of that type, ``l`` for ``q`` say,
    gives the code here)."""
    if pointer or dtype is None:
        return "P"
    if dtype.kind == "b":
        return "?"
    codes = "efd" if dtype.kind == "f" else "BHIQ" if dtype.kind == "u" else "bhiq"
    index = {1: 0, 2: 1, 4: 2, 8: 3}[dtype.itemsize] - (1 if dtype.kind == "f" else 0)
    return codes[index]


@cython.cclass
class Layout:
    """A loaded kernel's slots as the compiled core writes them (``write_common``): each slot's code (``G`` for a
    graph the kernel launches, which only the Python path writes) and what each wants (a pointer's dtype, None:
    any; a number's NumPy scalar type, as graph nodes keep it), with ``function``, the address the backend's hot
    calls take for the kernel (0: none)."""

    if not cython.compiled:  # (compiled, _argpack.pxd declares the fields)
        __slots__ = ("codes", "wants", "function")

    def __init__(self, codes: bytes, wants: tuple, function: int) -> None:
        self.codes, self.wants, self.function = codes, wants, function


def layout_of(signature: Sequence[KernelParam] | None, function: int) -> Layout | None:
    """The Layout of a kernel of ``signature`` loaded at ``function``, or None where a slot's type is told only by
    its argument (an untyped signature, a scalar of a type gpugraph cannot tell): the Python path converts those."""
    if signature is None or not all(p.pointer or p.dtype is not None for p in signature):
        return None
    codes = b"".join([b"G" if p.graph_exec and not p.pointer else code_of(p.dtype, p.pointer).encode()
                      for p in signature])
    wants = tuple([p.dtype if p.pointer or p.dtype is None else p.dtype.type for p in signature])  # (None: pointers)
    return Layout(codes, wants, function)


@cython.cclass
class Slots:
    """``count`` argument slots and the array of their addresses (what ``kernelParams`` takes), owned together:
    the driver reads them where a launch or a node set is made."""

    if not cython.compiled:  # (compiled, _argpack.pxd declares the fields)
        __slots__ = ("count", "_data", "_pointers", "_address")

    def __init__(self, count: int) -> None:
        self.count = count
        self._data = bytearray(SLOT * max(count, 1))  # (never resized: the address array points into it)
        self._pointers: ctypes.Array[ctypes.c_void_p] | None = None  # the address array, made when first asked for
        self._address = 0  # its address

    def kernel_params(self) -> int:
        """The address of the array of the slots' addresses (``kernelParams``)."""
        if not self._address:
            base = ctypes.addressof(ctypes.c_char.from_buffer(self._data))
            pointers = (ctypes.c_void_p * max(self.count, 1))(*[base + SLOT * i for i in range(self.count)])
            self._pointers, self._address = pointers, ctypes.addressof(pointers)
        return self._address

    def data(self) -> int:
        """The address of the first slot."""
        return ctypes.addressof(ctypes.c_char.from_buffer(self._data))

    def raw(self) -> bytes:
        """The slots' bytes."""
        return bytes(self._data)

    def copy(self) -> Slots:
        """New slots holding these' values."""
        other = Slots(self.count)
        other._data[:] = self._data
        return other

    def put(self, index: int, code: int, value: object) -> bool:
        """Write ``value`` into slot ``index`` as ``code`` (the code's character value, ``ord("i")`` say) says, if
        the slot takes it as it is: for ``P``, an address (an int from 0 to 2**64 - 1, or a NumPy unsigned integer
        such as a graph argument); for a number code, a Python int in its range, a Python float for a floating code
        (finite, in range), or a NumPy scalar of the code's own type. False, the slot unchanged, otherwise.

        Raises IndexError for an index outside the slots."""
        if not 0 <= index < self.count:
            raise IndexError(f"slot {index} of {self.count}")
        return put_slot(_base(self._data), SLOT * index, code, value)

    def fill(self, codes: bytes, args: tuple) -> int:
        """Write ``args`` into the first ``len(args)`` slots, each as its code in ``codes`` says (an Array as its
        address): -1 when every one was written, else the index of the first one declined (``put``'s rules; the
        slots before it hold their new values)."""
        count = len(args)
        if count > self.count or len(codes) < count:
            raise IndexError(f"{count} arguments for {self.count} slots and {len(codes)} codes")
        data, array = _base(self._data), Array
        for i in range(count):
            value = args[i]
            if type(value) is array:
                value = value.ptr
            if not put_slot(data, SLOT * i, codes[i], value):
                return i
        return -1

    def fill_common(self, codes: bytes, wants: tuple, device: object, args: tuple, typed: list | None = None) -> int:
        """``write_common`` into these slots."""
        if len(args) > self.count:
            raise IndexError(f"{len(args)} arguments for {self.count} slots")
        return write_common(codes, wants, device, args, _base(self._data), typed)


def _base(data: bytearray) -> bytearray:
    """Where ``put_slot`` writes the slots of ``data``: compiled, the address of its first byte; plain, ``data``."""
    if cython.compiled:
        return PyByteArray_AS_STRING(data)
    else:
        return data


def write_common(codes: bytes, wants: tuple, device: object, args: tuple, data: bytearray,
                 typed: list | None) -> int:
    """Write ``args`` into the slots at ``data`` (``_base``'s) if each is one of the common cases the compiled core
    takes on its own: an Array on ``device`` whose dtype is the one its pointer slot wants (``wants[i]``, None: any),
    or a Python int or float its scalar slot takes as it is (``Slots.put``; half and bool slots, and graphs, code
    ``G``, are none). The count written, or -1 for anything else (the slots then hold a partial write, which the
    caller's Python path, converting or explaining the arguments, writes again whole). ``typed``, if given (an empty
    list), gets each argument as a graph node keeps it: an Array as it is, a number as the NumPy scalar type of its
    slot (``wants[i]``)."""
    count = len(args)
    if len(codes) != count or len(wants) != count:
        return -1
    array = Array
    for i in range(count):
        code, value, want = codes[i], args[i], wants[i]
        if code == 80:  # P
            if type(value) is not array or value.device is not device:
                return -1
            if want is not None and value.dtype is not want:
                return -1  # (NumPy's dtypes are singletons: another object is another dtype, or left to the converter)
            _store_natural(data, SLOT * i, value.ptr)
            if typed is not None:
                typed.append(value)
            continue
        if code == 101 or code == 63 or code == 71 or (type(value) is not int and type(value) is not float):
            return -1
        if not put_slot(data, SLOT * i, code, value):
            return -1
        if typed is not None:
            typed.append(typed_number(want, value))
    return count


_TYPED_KEPT = 1024  # numbers kept per NumPy type (beyond them, new ones are made)
_typed_ints: dict[type, dict[int, np.generic]] = {}  # a NumPy scalar type -> {a Python int: that int as the type}


def typed_number(want: type, value: float) -> np.generic:
    """``want(value)``: a Python number as the NumPy scalar type a graph node keeps it as, one object for each int
    (records keep many; a float is made anew: 0.0 and -0.0 are equal keys, and a shared one would lose the sign)."""
    if type(value) is not int:
        return want(value)
    values = _typed_ints.get(want)
    if values is None:
        values = _typed_ints[want] = {}
    number = values.get(value)
    if number is None:
        number = want(value)
        if len(values) < _TYPED_KEPT:
            values[value] = number
    return number


def put_slot(data: bytearray, offset: int, code: int, value: object) -> bool:
    """Write ``value`` at ``offset`` of ``data`` (``_base``'s) as slot code ``code`` says, if the slot takes it
    (``Slots.put``)."""
    if type(value) is int:
        return _put_int(data, offset, code, value)
    if type(value) is float:
        return _put_real(data, offset, code, value)
    return _put_scalar(data, offset, code, value)


def _put_int(data: bytearray, offset: int, code: int, value: int) -> bool:
    """Write the Python int ``value`` as code ``code`` says, if it is in the range of the code's type."""
    if code == 100 or code == 102 or code == 101:  # d, f, e: compared as an int, exactly
        limit = _DOUBLE_MAX if code == 100 else _FLOAT_MAX if code == 102 else _HALF_MAX
        if not -limit <= value <= limit:
            return False
        return _put_real(data, offset, code, value)
    if code == 81 or code == 80:  # Q, P
        if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
            return False
        _store_natural(data, offset, value)
        return True
    if not cython.compiled and not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        return False
    try:
        whole = value
    except OverflowError:  # (compiled: beyond 64 bits, which the test above tells plain)
        return False
    if code == 105:  # i
        low, high, size = -0x80000000, 0x7FFFFFFF, 4
    elif code == 73:  # I
        low, high, size = 0, 0xFFFFFFFF, 4
    elif code == 113:  # q (in range: tested above)
        low, high, size = whole, whole, 8
    elif code == 98:  # b
        low, high, size = -0x80, 0x7F, 1
    elif code == 66:  # B
        low, high, size = 0, 0xFF, 1
    elif code == 104:  # h
        low, high, size = -0x8000, 0x7FFF, 2
    elif code == 72:  # H
        low, high, size = 0, 0xFFFF, 2
    elif code == 63:  # ?
        low, high, size = 0, 1, 1
    else:
        return False
    if not low <= whole <= high:
        return False
    _store_whole(data, offset, whole, size, code)
    return True


def _put_real(data: bytearray, offset: int, code: int, value: float) -> bool:
    """Write the Python number ``value`` as floating code ``code`` says, if it is finite and in the type's range."""
    real = value
    if code == 100:
        if not -_DOUBLE_MAX <= real <= _DOUBLE_MAX:  # (nan fails it too)
            return False
        _store_double(data, offset, real)
    elif code == 102:
        if not -_FLOAT_MAX <= real <= _FLOAT_MAX:
            return False
        _store_float(data, offset, real)
    elif code == 101:
        if not -_HALF_MAX <= real <= _HALF_MAX:
            return False
        _store_bytes(data, offset, np.float16(real).tobytes())
    else:
        return False
    return True


def _put_scalar(data: bytearray, offset: int, code: int, value: object) -> bool:
    """Write the NumPy scalar ``value`` if it is of the code's own type (a ``d`` slot takes a float64 as its exact
    double), or an unsigned 64-bit integer for an address."""
    kind = type(value)
    scalar = _SCALAR_TYPES.get(kind)
    if scalar is None:
        if not isinstance(value, np.generic) or value.dtype.kind not in "biuf" or value.dtype.itemsize > SLOT:
            return False
        scalar = ord(code_of(value.dtype, False))
        if len(_SCALAR_TYPES) < _SCALAR_TYPES_KEPT:
            _SCALAR_TYPES[kind] = scalar
    if scalar != code and not (code == 80 and scalar == 81):  # (an address may come as a uint64: a graph's)
        return False
    if code == 101 or code == 102:  # half, float: their own bytes, a signalling NaN's too
        _store_bytes(data, offset, value.tobytes())  # type: ignore[attr-defined]
    elif code == 100:
        _store_double(data, offset, value)  # type: ignore[arg-type]
    else:
        return _put_int(data, offset, code, int(value))  # type: ignore[call-overload]
    return True


# The stores: C stores compiled, struct's plain (the one place the two modes differ).

def _store_double(data: bytearray, offset: int, value: float) -> None:
    if cython.compiled:
        real = value
        memcpy(cython.cast(cython.p_char, data) + offset, cython.address(real), 8)
    else:
        _STRUCTS["d"].pack_into(data, offset, value)


def _store_float(data: bytearray, offset: int, value: float) -> None:
    if cython.compiled:
        real = value
        slot = cython.declare(cython.p_char, cython.cast(cython.p_char, data) + offset)
        memset(slot, 0, 8)
        memcpy(slot, cython.address(real), 4)
    else:
        _STRUCTS["f"].pack_into(data, offset, value)


def _store_bytes(data: bytearray, offset: int, value: bytes) -> None:
    if cython.compiled:
        memset(cython.cast(cython.p_char, data) + offset, 0, 8)
        memcpy(cython.cast(cython.p_char, data) + offset, cython.cast(cython.p_char, value), len(value))
    else:
        data[offset:offset + SLOT] = value.ljust(SLOT, b"\0")


def _store_natural(data: bytearray, offset: int, value: int) -> None:
    if cython.compiled:
        natural = value
        memcpy(cython.cast(cython.p_char, data) + offset, cython.address(natural), 8)
    else:
        _STRUCTS["Q"].pack_into(data, offset, value)


def _store_whole(data: bytearray, offset: int, whole: int, size: int, code: int) -> None:
    """Store ``whole`` (in the range of ``code``'s type) in its ``size`` bytes, the slot's others zero."""
    if cython.compiled:
        slot = cython.declare(cython.p_char, cython.cast(cython.p_char, data) + offset)
        memset(slot, 0, 8)
        memcpy(slot, cython.address(whole), size)  # (little-endian: the low bytes first)
    else:
        _STRUCTS[chr(code)].pack_into(data, offset, whole)
