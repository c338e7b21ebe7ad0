"""The current stream: where code that takes no stream argument (and ``captured`` functions) enqueue work."""

from __future__ import annotations

import threading

from . import _interrupts
from ._device import Device
from ._interrupts import guard_interrupts, release_interrupts, stream_choices
from ._stream import Stream

# This thread's own streams (attribute ``own``). The stack of chosen streams is _interrupts.stream_choices: it
# keeps Ctrl-C's stand-in while a block is open.
_local = threading.local()


def current_stream(device: Device | None = None) -> Stream:
    """The stream work goes to on ``device`` (default ``Device()``) in this thread.

    It is the innermost ``use_stream`` of that device, else a non-blocking stream of this thread's own.

    Raises:
        TypeError: If ``device`` is not a Device or None (a spec string: pass ``gg.Device(spec)``).
    """
    if device is None:
        device = Device()
    elif type(device) is not Device:
        hint = f" (pass gg.Device({device!r}))" if isinstance(device, str) else ""
        raise TypeError(f"current_stream(device): expected a Device or None, got {type(device).__name__}{hint}")
    chosen = getattr(stream_choices, "chosen", None)
    if chosen:
        for stream in reversed(chosen):
            if stream.device is device:
                return stream
    return own_stream(device)


def own_stream(device: Device, role: str = "default") -> Stream:
    """This thread's own non-blocking stream of ``device`` for ``role``, made at first use: "default" is
    ``current_stream``'s fallback, "capture" the stream ``@captured`` functions capture on in this thread."""
    streams = getattr(_local, "own", None)
    if streams is None:
        streams = _local.own = {}
    stream = streams.get((role, device))
    if stream is None:
        stream = streams[(role, device)] = device.stream()
    return stream


class use_stream:  # lower case: used as a function, ``with gg.use_stream(s):``
    """Make ``stream`` the current stream of its device in this thread for the ``with`` block.

    Entering and leaving are all or nothing against KeyboardInterrupt: the stream is pushed by the last
    operation of ``__enter__`` and popped by the first of ``__exit__``'s calls, with no point between them
    and the ``with`` block where CPython could raise it (no call: ``+=`` on a list is one bytecode).
    """

    __slots__ = ("stream",)

    def __init__(self, stream: Stream) -> None:
        if type(stream) is not Stream:
            raise TypeError(f"use_stream(stream): expected a Stream, got {type(stream).__name__}")
        self.stream = stream

    def __enter__(self) -> Stream:
        chosen = getattr(stream_choices, "chosen", None)
        if chosen is None:
            chosen = stream_choices.chosen = []
        stream = self.stream
        # The first instruction of __exit__ is a check point: the stand-in covers it while the block is open.
        # (An interrupt just after this call leaves it installed with nothing pushed: the next release of
        # the stand-in, which finds no block open, gives SIGINT back.)
        guard_interrupts()
        chosen += [stream]  # last, and no call: KeyboardInterrupt cannot come between this and the block
        return stream

    def __exit__(self, *exc_info: object) -> None:
        try:
            stream_choices.chosen.pop()
        finally:  # an interrupt held back at this method's entry is raised by the release
            release_interrupts()


_interrupts.ways_out.append(use_stream.__exit__.__code__)  # its entry is held back (see _interrupts)
