"""The current stream: where code that takes no stream argument (and ``captured`` functions) enqueue work."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from ._stream import Stream

_local = threading.local()


def current_stream(device: Any = None) -> Stream:
    """The stream work goes to on ``device`` (default ``Device()``) in this thread.

    It is the innermost ``use_stream`` of that device, else a non-blocking stream of this thread's own.
    """
    from ._device import Device
    device = Device() if device is None else device
    chosen = getattr(_local, "chosen", None)
    if chosen:
        for stream in reversed(chosen):
            if stream.device is device:
                return stream
    defaults = getattr(_local, "defaults", None)
    if defaults is None:
        defaults = _local.defaults = {}
    stream = defaults.get(device)
    if stream is None:
        stream = defaults[device] = device.stream()
    return stream


@contextlib.contextmanager
def use_stream(stream: Stream) -> Iterator[Stream]:
    """Make ``stream`` the current stream of its device in this thread for the ``with`` block."""
    if type(stream) is not Stream:
        raise TypeError(f"use_stream(stream): expected a Stream, got {type(stream).__name__}")
    chosen = getattr(_local, "chosen", None)
    if chosen is None:
        chosen = _local.chosen = []
    chosen.append(stream)
    try:
        yield stream
    finally:
        chosen.pop()
