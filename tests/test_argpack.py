"""Kernel arguments in their slots (``gpugraph._argpack``): every value a slot takes is written as NumPy writes the
slot's C type, little-endian, the slot's other bytes zero; anything else is declined with the slot unchanged. The
suite runs compiled and plain (``GPUGRAPH_COMPILED=0``), so both ways of writing are held to the same bytes."""

from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gpugraph as gg
from gpugraph._argpack import SLOT, Slots, code_of, layout_of

INTEGER_CODES = "bBhHiIqQ"


def slot(code: str, value: object) -> bytes | None:
    """The slot ``put`` writes for ``value`` as ``code`` (None: declined), starting from a slot of 0xAA bytes."""
    slots = Slots(1)
    slots.put(0, ord("Q"), 0xAAAAAAAAAAAAAAAA)
    before = slots.raw()
    if not slots.put(0, ord(code), value):
        assert slots.raw() == before, "a declined value changed its slot"
        return None
    return slots.raw()


def numpy_slot(code: str, value: object) -> bytes:
    """NumPy's bytes of ``value`` as the C type of ``code``, padded with zeros to a slot."""
    dtype = np.dtype("u8" if code == "P" else code)
    return np.array(value, dtype).astype(dtype.newbyteorder("<")).tobytes().ljust(SLOT, b"\0")


def bounds(code: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(code))
    return int(info.min), int(info.max)


@pytest.mark.parametrize("code", INTEGER_CODES)
def test_an_int_in_range_is_written_as_its_c_type_and_one_past_either_end_is_declined(code):
    low, high = bounds(code)
    for value in (low, high, 0, 1, low + 1, high - 1):
        assert slot(code, value) == numpy_slot(code, value)
    assert slot(code, low - 1) is None
    assert slot(code, high + 1) is None


@given(st.integers(-(2**70), 2**70), st.sampled_from(INTEGER_CODES))
def test_any_int_is_written_exactly_when_its_type_holds_it(value, code):
    low, high = bounds(code)
    assert slot(code, value) == (numpy_slot(code, value) if low <= value <= high else None)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_python_float_is_written_as_a_float_or_double_when_finite_and_in_range(real):
    assert slot("d", real) == (numpy_slot("d", real) if math.isfinite(real) else None)
    in_float = math.isfinite(real) and abs(real) <= float(np.finfo(np.float32).max)
    with np.errstate(over="ignore"):
        assert slot("f", real) == (numpy_slot("f", real) if in_float else None)
        in_half = math.isfinite(real) and abs(real) <= 65504
        assert slot("e", real) == (numpy_slot("e", real) if in_half else None)


@given(st.integers(-(2**1030), 2**1030))
def test_an_int_for_a_floating_slot_is_compared_with_its_range_exactly(value):
    f32_max = int(np.finfo(np.float32).max)
    assert slot("f", value) == (numpy_slot("f", float(value)) if abs(value) <= f32_max else None)
    d_max = int(np.finfo(np.float64).max)
    assert slot("d", value) == (numpy_slot("d", float(value)) if abs(value) <= d_max else None)


def test_a_float_is_declined_by_an_integer_slot_and_an_address():
    for code in INTEGER_CODES + "P?":
        assert slot(code, 1.0) is None


def test_a_bool_slot_takes_0_1_and_numpy_bools():
    assert slot("?", 1) == b"\x01" + bytes(7)
    assert slot("?", 0) == bytes(8)
    assert slot("?", np.True_) == b"\x01" + bytes(7)
    assert slot("?", 2) is None
    assert slot("?", True) is None  # (a Python bool: the converters make it a NumPy bool first)


@pytest.mark.parametrize("code", "?bBhHiIqQefd")
def test_a_numpy_scalar_of_the_slots_own_type_is_written_as_its_bytes(code):
    dtype = np.dtype(code)
    value = dtype.type(1) if code == "?" else np.array(-7 if dtype.kind in "if" else 200, dtype)[()]
    assert slot(code, value) == value.tobytes().ljust(SLOT, b"\0")
    other = "i" if code != "i" else "q"
    assert slot(other, value) is None  # another type's slot declines it (the converters convert it first)


def test_numpy_types_of_one_c_type_share_its_code():
    assert slot("q", np.int64(-5)) == slot("q", np.longlong(-5)) == numpy_slot("q", -5)
    assert slot("Q", np.uint64(5)) == slot("Q", np.ulonglong(5)) == numpy_slot("Q", 5)
    assert code_of(np.dtype(np.int64), False) == code_of(np.dtype("q"), False) == "q"
    assert [code_of(np.dtype(c), False) for c in "?bBhHiIqQefd"] == list("?bBhHiIqQefd")
    assert code_of(np.dtype(np.float32), True) == code_of(None, False) == "P"


def test_a_signalling_nan_of_half_and_float_keeps_its_bits():
    f32 = np.array([0x7FA00001], np.uint32).view(np.float32)[0]
    f16 = np.array([0x7D01], np.uint16).view(np.float16)[0]
    assert slot("f", f32) == (0x7FA00001).to_bytes(4, "little") + bytes(4)
    assert slot("e", f16) == (0x7D01).to_bytes(2, "little") + bytes(6)
    nan64 = np.array([0x7FF4000000000001], np.uint64).view(np.float64)[0]
    assert slot("d", nan64) == (0x7FF4000000000001).to_bytes(8, "little")  # a NumPy double, as it is


def test_an_address_takes_an_int_or_a_uint64_scalar_only():
    assert slot("P", 0xFFFFFFFFFFFFFFFF) == b"\xff" * 8
    assert slot("P", np.uint64(16)) == numpy_slot("P", 16)
    assert slot("P", -1) is None
    assert slot("P", 2**64) is None
    assert slot("P", np.int64(16)) is None
    assert slot("P", "16") is None


def test_other_objects_are_declined():
    for value in ("1", None, [1], 1 + 0j, np.complex64(1), np.float128(1) if hasattr(np, "float128") else None,
                  np.array([1], np.int32), object()):
        for code in "?bBhHiIqQefdP":
            assert slot(code, value) is None


def test_fill_writes_arguments_and_arrays_addresses_in_order_and_names_the_first_declined(device):
    x = device.zeros(4, np.float32)
    slots = Slots(3)
    assert slots.fill(b"PiQ", (x, -2, np.uint64(7))) == -1
    assert slots.raw() == x.ptr.to_bytes(8, "little") + numpy_slot("i", -2) + numpy_slot("Q", 7)
    assert slots.fill(b"Pif", (x, 3, "nope")) == 2
    assert slots.raw()[SLOT:2 * SLOT] == numpy_slot("i", 3)  # (the ones before it written)
    with pytest.raises(IndexError):
        slots.fill(b"PiQi", (x, 1, 2, 3))  # more arguments than slots


def test_kernel_params_points_at_each_slot_and_a_copy_is_its_own():
    slots = Slots(3)
    assert slots.fill(b"iqd", (1, 2, 3.5)) == -1
    pointers = (ctypes.c_void_p * 3).from_address(slots.kernel_params())
    assert [pointers[i] for i in range(3)] == [slots.data() + SLOT * i for i in range(3)]
    assert ctypes.c_int32.from_address(pointers[0]).value == 1
    assert ctypes.c_double.from_address(pointers[2]).value == 3.5
    copy = slots.copy()
    assert copy.raw() == slots.raw() and copy.kernel_params() != slots.kernel_params()
    copy.put(0, ord("i"), 9)
    assert ctypes.c_int32.from_address(pointers[0]).value == 1  # (the original unchanged)


def test_put_refuses_a_slot_outside_them():
    slots = Slots(2)
    for index in (-1, 2):
        with pytest.raises(IndexError):
            slots.put(index, ord("i"), 1)



def common(device, codes: bytes, args: tuple, wants: tuple | None = None) -> tuple[bytes, list] | None:
    """What ``fill_common`` writes and types for ``args`` (None: declined)."""
    slots, typed = Slots(len(args)), []
    wants = wants if wants is not None else tuple(None if c == ord("P") else np.dtype(chr(c)).type for c in codes)
    count = slots.fill_common(codes, wants, device, args, typed)
    if count < 0:
        return None
    assert count == len(args)
    return slots.raw()[:SLOT * len(args)], typed


def test_the_common_cases_are_written_as_put_writes_them_and_typed_as_nodes_keep_them(device):
    x = device.zeros(4, np.float32)
    raw, typed = common(device, b"Pifdq", (x, -3, 2.5, 7, 2**40), (np.dtype(np.float32), np.int32, np.float32,
                                                                    np.float64, np.int64))
    assert raw == (x.ptr.to_bytes(8, "little") + numpy_slot("i", -3) + numpy_slot("f", 2.5) + numpy_slot("d", 7)
                   + numpy_slot("q", 2**40))
    assert typed[0] is x
    assert [type(v) for v in typed[1:]] == [np.int32, np.float32, np.float64, np.int64]
    assert typed[1:] == [-3, 2.5, 7.0, 2**40]
    again = common(device, b"i", (-3,))
    assert again is not None and again[1][0] is typed[1]  # (one object for each int of a type)


@pytest.mark.parametrize("codes, args", [
    (b"i", (1.5,)),  # a float for an integer: the converter's rules
    (b"i", (2**31,)),  # out of range
    (b"f", (float("inf"),)),
    (b"d", (float("nan"),)),
    (b"i", (np.int32(1),)),  # a NumPy scalar: the converter's
    (b"i", ("1",)),
    (b"?", (1,)),  # bool and half slots: the converter's
    (b"e", (1.0,)),
    (b"G", (1,)),  # a graph the kernel launches
    (b"ii", (1,)),  # a count that is not the codes'
    (b"P", (5,)),  # an int for a pointer
    (b"I", (-1,)), (b"b", (128,)), (b"Q", (2**64,)), (b"q", (2**63,)), (b"i", (-(2**31) - 1,)),
    (b"f", (1e39,)), (b"f", (2**200,)), (b"f", (int(np.finfo(np.float32).max) + 1,)),
    (b"d", (int(np.finfo(np.float64).max) + 1,)),
    (b"i", (True,)), (b"f", (np.float32(1),)),  # other kinds
])
def test_anything_else_is_declined(device, codes, args):
    assert common(device, codes, args) is None


def test_an_array_is_declined_unless_on_the_device_with_the_dtype_wanted(device):
    x = device.zeros(4, np.float32)
    assert common(device, b"P", (x,), (None,)) is not None  # void*: any dtype
    assert common(device, b"P", (x,), (np.dtype(np.float32),)) is not None
    assert common(device, b"P", (x,), (np.dtype(np.float64),)) is None
    assert common(object(), b"P", (x,), (None,)) is None  # another device
    assert common(device, b"P", (np.zeros(4, np.float32),), (None,)) is None  # a NumPy array: the converter's


def test_a_typed_signature_has_a_layout_of_each_slots_code_and_want():
    source = ('extern "C" __global__ void k(float* x, const double* y, void* z, int n, unsigned long long m, '
              'float f, double d, short s, unsigned char c) {}')
    layout = layout_of(gg.Kernel(source, "k").signature, 42)
    assert layout.codes == b"PPPiQfdhB" and layout.function == 42
    assert layout.wants == (np.dtype(np.float32), np.dtype(np.float64), None, np.int32, np.uint64, np.float32,
                            np.float64, np.int16, np.uint8)
    assert layout_of(None, 42) is None  # untyped: the Python path converts every argument
    assert layout_of(gg.Kernel('extern "C" __global__ void k(my_t n) {}', "k").signature, 42) is None
