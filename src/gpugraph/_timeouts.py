"""The one rule for a ``timeout=`` that gpugraph's calls take: seconds as a real number, or no limit."""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from ._scalars import describe

# Past this many seconds a wait has no limit: Python's locks refuse longer ones (OverflowError), and it is
# centuries anyway.
NO_LIMIT = threading.TIMEOUT_MAX


def timeout_seconds(value: Any, where: str, *, zero: bool) -> float | None:
    """``value`` as ``where``'s timeout: seconds as a float, or None for no limit (None, inf, or more than
    ``NO_LIMIT``). Seconds are an int or float (a NumPy one too; not a bool), above 0, or 0 too where ``zero``
    (0: do not wait).

    Raises:
        TypeError: If ``value`` is not a real number or None.
        ValueError: If it is NaN, negative, or 0 where ``zero`` is false.
    """
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{where}(timeout): expected seconds (an int or float) or None, got {describe(value)}")
    # (An int is bounded before float(): float() of a huge int overflows.)
    number = float(min(max(int(value), -1), NO_LIMIT)) if isinstance(value, (int, np.integer)) else float(value)
    if math.isnan(number) or number < 0 or not (zero or number > 0):
        rule = "seconds >= 0 (0: do not wait)" if zero else "seconds > 0"
        raise ValueError(f"{where}(timeout): expected {rule}, or inf or None for no limit; got {value!r}")
    return None if number >= NO_LIMIT else number
