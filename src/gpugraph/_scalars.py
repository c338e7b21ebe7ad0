"""One set of rules for a number given where a C scalar is expected: kernel arguments and Param values; and
for the ints, real numbers and bools that gpugraph's calls take (``as_int``, ``as_real``, ``as_bool``).

A real number — a Python bool, int or float, or a NumPy bool, integer or floating scalar — is accepted
when the C type holds its value: an integer type takes integral values within its range (``bool`` takes
0 and 1), a floating type takes any value within its finite range, and inf and nan. A bool counts as 0
or 1, as in C. Python and NumPy numbers follow the same rules and get the same messages; complex numbers,
strings, arrays (0-d ones too) and other objects are refused with ``TypeError``.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

NUMBERS = (int, float, np.bool_, np.integer, np.floating)  # bool is an int; np.float64 is a float


def is_number(value: Any) -> bool:
    """Whether ``value`` is a real number gpugraph converts to a C scalar."""
    return isinstance(value, NUMBERS)


def describe(value: Any) -> str:
    """``value``'s type and a short form of it, for messages: an array's shape and dtype (its repr would be cut
    before them), else its repr, cut at a space after at most 60 characters and marked with "..."."""
    if isinstance(value, np.ndarray) and value.ndim:
        return f"ndarray of shape {value.shape}, dtype {value.dtype}"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:60].rsplit(" ", 1)[0] + " ..."
    return f"{type(value).__name__} {shown}"


def check_dtype(dtype: Any, where: str) -> np.dtype:
    """``dtype`` as a NumPy dtype of a C number type (bool, integer or floating, at most 8 bytes)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}: dtype must be a C number type (bool, integer or floating, at most 8 bytes), "
                        f"got {describe(dtype)}, which is no NumPy dtype") from None
    if dtype.kind not in "biuf" or dtype.itemsize > 8:
        raise TypeError(f"{where}: dtype must be a C number type (bool, integer or floating, at most 8 bytes), "
                        f"got {dtype}")
    return dtype


@functools.cache
def bounds(dtype: np.dtype) -> tuple[bool, Any, Any]:
    """(integral, low, high): the values ``dtype`` holds; a floating type's finite range."""
    if dtype.kind == "b":
        return True, 0, 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return True, int(info.min), int(info.max)
    limit = float(np.finfo(dtype).max)
    return False, -limit, limit


def to_c(value: Any, dtype: np.dtype, ctype: str, where: str) -> Any:
    """``value`` as a NumPy scalar of ``dtype`` (the C type ``ctype``), or raise naming ``where``.

    Raises:
        TypeError: If ``value`` is not a real number, or not integral for an integer type.
        ValueError: If ``value`` is out of the type's range.
    """
    if not isinstance(value, NUMBERS):
        hint = (" (a 0-d array: pass arr[()] or arr.item())"
                if isinstance(value, np.ndarray) and value.ndim == 0 else "")
        raise TypeError(f"{where}: expects a C {ctype} scalar, got {describe(value)}{hint}")
    integral, low, high = bounds(dtype)
    if integral:
        if isinstance(value, float):  # Python floats and np.float64
            whole = value.is_integer()
        elif isinstance(value, np.floating):
            whole = bool(np.isfinite(value) and value == np.trunc(value))
        else:
            whole = True
        if not whole:
            raise TypeError(f"{where}: expects an integer, got {describe(value)}")
        number = int(value)
        if not low <= number <= high:
            raise ValueError(f"{where}: {value!r} does not fit in {ctype} ({low}..{high})")
        return dtype.type(number)
    number = _exact(value)
    if not low <= number <= high and _finite(number):  # inf and nan fit, as in C
        raise ValueError(f"{where}: {value!r} does not fit in {ctype} (|x| <= {high:g})")
    return dtype.type(value)


def _exact(value: Any) -> Any:
    """``value`` as a Python number where that is exact, so comparing it with Python limits is exact (NumPy
    would cast the limit to a narrow float type instead)."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, (np.integer, np.bool_)):
        return int(value)
    return float(value) if value.dtype.itemsize <= 8 else value  # np.longdouble compares as itself


def _finite(number: Any) -> bool:
    if isinstance(number, int):
        return True
    if isinstance(number, float):
        return math.isfinite(number)
    return bool(np.isfinite(number))


def as_int(value: Any) -> int | None:
    """``value`` as an int where it is an integer (a NumPy one too) and not a bool, else None."""
    try:
        return operator.index(value) if not isinstance(value, bool) else None
    except TypeError:
        return None


def as_real(value: Any) -> float | None:
    """``value`` as a float where it is a real number (a Python or NumPy integer or float) and not a bool, else
    None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, NUMBERS):
        return None
    return float(value)


def as_bool(value: Any) -> bool | None:
    """``value`` as a bool where it is one (a NumPy one too), else None: 0 and 1 are ints, not bools."""
    return bool(value) if isinstance(value, (bool, np.bool_)) else None
